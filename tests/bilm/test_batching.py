import pytest

from spacy_elmo.bilm import plan_batches


def test_every_index_once_and_caps_respected():
    lengths = [5, 1, 30, 7, 7, 2, 0, 12]
    batches = plan_batches(lengths, batch_size=3, max_batch_items=40)
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    for batch in batches:
        assert len(batch) <= 3
        longest = max(max(lengths[i] for i in batch), 1)
        assert len(batch) * longest <= 40 or len(batch) == 1


def test_long_item_alone():
    assert [2] in plan_batches([1, 1, 100], batch_size=8, max_batch_items=50)


def test_rejects_bad_sizes():
    with pytest.raises(ValueError):
        plan_batches([1], batch_size=0)


def test_windows_cover_a_range_in_order_with_a_shorter_last_one():
    from spacy_elmo.bilm.batching import windows

    assert windows(3, 10, 3) == [(3, 6), (6, 9), (9, 10)]
    assert windows(0, 0) == [] and windows(0, 5) == [(0, 5)]
    with pytest.raises(ValueError):
        windows(0, 5, 0)
