import threading

from spacy_elmo.fast.switches import ThreadSwitch


def test_on_in_this_thread_only_and_restored_after_nesting():
    switch = ThreadSwitch()
    seen = []
    with switch.on():
        with switch.on():
            assert switch.active
        assert switch.active  # the inner block leaves it as the outer one set it
        worker = threading.Thread(target=lambda: seen.append(switch.active))
        worker.start()
        worker.join()
    assert seen == [False] and not switch.active
