"""torch's threads for the biLM's own calls (``layers/torch_threads.py``)."""
import pytest
import spacy
import torch

from spacy_elmo.bilm import BiLM
from spacy_elmo.bilm.config import ORIGINAL, SMALL
from spacy_elmo.layers import ElmoBiLM
from spacy_elmo.layers.torch_threads import (
    free_cores, resolve_threads, running_elsewhere, threads_for, torch_threads, usable_cores, user_cap,
)
from spacy_elmo.layers import torch_threads as torch_threads_module
from spacy_elmo.pipeline import create_pipeline

from ..conftest import random_bilm


@pytest.fixture()
def threads_in_bilm(monkeypatch):
    """The torch thread count each BiLM forward pass ran on."""
    seen = []
    forward = BiLM.forward

    def recording(self, *args, **kwargs):
        seen.append(torch.get_num_threads())
        return forward(self, *args, **kwargs)

    monkeypatch.setattr(BiLM, "forward", recording)
    return seen


def test_the_rule_gives_small_biLMs_one_thread_and_the_original_five_capped_at_the_cores():
    assert threads_for(SMALL, cores=16) == 1
    assert threads_for(ORIGINAL, cores=16) == 5  # 5 x 4096 x 512 weights a step, 2 million a thread
    assert threads_for(ORIGINAL, cores=2) == 2
    assert threads_for(ORIGINAL) == min(5, usable_cores(), user_cap())
    # within the cores other jobs left free when the biLM first ran in this process, and the user's cap
    assert resolve_threads(0, ORIGINAL) == threads_for(ORIGINAL, cores=min(free_cores(), user_cap())) <= threads_for(ORIGINAL)
    assert 1 <= free_cores() <= usable_cores() and resolve_threads(3, SMALL) == 3
    assert resolve_threads(None, ORIGINAL) is None
    with pytest.raises(ValueError, match="threads"):
        resolve_threads(-1, SMALL)


def test_threads_0_never_takes_more_threads_than_the_user_allowed(monkeypatch):
    """OMP_NUM_THREADS and torch's count as the user set it cap the rule, on a machine of 16 free cores."""
    monkeypatch.setattr(torch_threads_module, "free_cores", lambda: 16)
    monkeypatch.setattr(torch_threads_module, "usable_cores", lambda: 16)
    before = torch.get_num_threads()
    try:
        monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
        torch.set_num_threads(8)
        assert resolve_threads(0, ORIGINAL) == 5 and threads_for(ORIGINAL) == 5  # the rule's own count
        monkeypatch.setenv("OMP_NUM_THREADS", "1")  # exported by the user: init-config's line and the calls keep to it
        assert resolve_threads(0, ORIGINAL) == 1 and threads_for(ORIGINAL) == 1
        monkeypatch.setenv("OMP_NUM_THREADS", "2,1")  # a nested list: its first count is this level's
        assert resolve_threads(0, ORIGINAL) == 2
        monkeypatch.setenv("OMP_NUM_THREADS", "not a count")  # nothing asked: torch's count alone caps
        assert resolve_threads(0, ORIGINAL) == 5
        torch.set_num_threads(3)  # the user's torch.set_num_threads
        assert resolve_threads(0, ORIGINAL) == 3 and threads_for(ORIGINAL) == 3
        # a count given in the config is the user's own: kept as given
        monkeypatch.setenv("OMP_NUM_THREADS", "1")
        assert resolve_threads(4, ORIGINAL) == 4
    finally:
        torch.set_num_threads(before)


def test_other_jobs_are_counted_as_they_run_now_not_by_the_minutes_average(tmp_path):
    loadavg = tmp_path / "loadavg"
    # a job that ended a moment ago still weighs 1.9 in the minute's average; now only the reader runs
    loadavg.write_text("1.90 1.20 0.80 1/312 4242\n")
    assert running_elsewhere(loadavg, readings=3, interval=0) == 0
    loadavg.write_text("0.10 0.20 0.30 3/312 4242\n")  # two threads of another job, and the reader
    assert running_elsewhere(loadavg, readings=3, interval=0) == 2
    for broken in ("", "0.1 0.2 0.3\n", "0.1 0.2 0.3 x/9 1\n"):
        loadavg.write_text(broken)
        assert running_elsewhere(loadavg, readings=1, interval=0) is None
    assert running_elsewhere(tmp_path / "missing") is None


def test_the_biLM_runs_on_its_own_threads_and_gives_the_process_its_count_back(threads_in_bilm, process_threads):
    from spacy.tokens import Doc
    from spacy.vocab import Vocab

    docs = [Doc(Vocab(), words=["a", "small", "test"])]
    for threads, expected in ((2, 2), (0, 1), (None, process_threads)):
        model = ElmoBiLM(
            random_bilm(), max_window=200, batch_size=8, max_batch_items=None, trainable=True,
            frozen_cache_mb=0, threads=threads,
        )
        outputs, backprop = model.begin_update(docs)
        backprop([out.layers for out in outputs])
        assert threads_in_bilm[-1] == expected
        assert torch.get_num_threads() == process_threads
    with pytest.raises(ValueError, match="threads"):
        ElmoBiLM(random_bilm(), max_window=200, batch_size=8, max_batch_items=None, trainable=False, threads=-1)
    with torch_threads(1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == process_threads


def test_loading_a_pipeline_leaves_the_process_threads_as_they_were(tmp_path, threads_in_bilm, process_threads):
    nlp = create_pipeline(random_bilm(), config={"model": {"threads": 2}})
    nlp.to_disk(tmp_path / "pipeline")
    loaded = spacy.load(tmp_path / "pipeline")
    assert torch.get_num_threads() == process_threads
    loaded("Threads stay as the user set them.")
    assert threads_in_bilm[-1] == 2 and torch.get_num_threads() == process_threads
