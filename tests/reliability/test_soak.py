"""Soak, CI-sized: 3,000 short Docs through nlp.pipe with RSS sampled.

The long run: ``python -m lab.reliability.soak_long --docs 100000 --output FILE``.
"""
import numpy as np
import pytest
import torch

from spacy_elmo.data_classes import ElmoOutput

from lab.reliability import soak as soak_module
from lab.reliability.fuzz import fuzz_pipelines
from lab.reliability.soak import SoakResult, describe_growth, holds_only_numpy, short_texts, soak

from ..conftest import load_tiny_bilm

DOCS, WARMUP = 3000, 1500


@pytest.fixture(scope="module")
def nlp():
    return fuzz_pipelines(load_tiny_bilm)["defaults"]


@pytest.mark.slow
def test_memory_is_flat_and_docs_hold_only_numpy(nlp):
    # a small closed vocabulary: spaCy's StringStore is full before the warm-up ends
    result = soak(nlp, short_texts(DOCS, vocab_size=500), n_docs=DOCS, warmup=WARMUP, sample_every=250)
    assert result.docs == DOCS and result.tokens > 10 * DOCS
    assert result.docs_with_torch_objects == 0
    assert result.torch_tensors_final <= result.torch_tensors_after_warmup, "torch tensors pile up"
    assert result.samples[-1] == [DOCS, result.rss_mb_final]
    assert result.peak_growth_pct < 5.0, result.samples


class RisingRSS:
    """A process whose RSS grows by 1 MB at every reading, from 100 MB."""

    def __init__(self):
        self.readings = 0

    def memory_info(self):
        self.readings += 1
        return type("MemoryInfo", (), {"rss": (99 + self.readings) * 2**20})()


def test_the_final_reading_is_the_last_sample_and_counts_in_the_growth(nlp, monkeypatch):
    process = RisingRSS()
    monkeypatch.setattr(soak_module.psutil, "Process", lambda: process)
    result = soak(nlp, short_texts(40, vocab_size=50), n_docs=40, warmup=10, sample_every=10)
    # readings: the warm-up's (100 MB), at 10, 20 and 30 Docs, then the final one after the run
    assert process.readings == 5
    assert result.samples == [[10, 101.0], [20, 102.0], [30, 103.0], [40, 104.0]]
    assert (result.rss_mb_after_warmup, result.rss_mb_final, result.rss_mb_max_after_warmup) == (100.0, 104.0, 104.0)
    assert result.growth_pct == result.peak_growth_pct == 4.0
    assert (result.intervals_rising, result.intervals_flat, result.intervals_falling) == (3, 0, 0)
    assert result.rose_at_every_sample


def test_growth_to_the_last_sample_and_to_the_largest_are_told_apart():
    # the 16 MB soak's readings after its warm-up at 467.1 MB: the final one is the largest
    rising = SoakResult()
    describe_growth(rising, 467.1, [468.2, 469.6, 470.3, 471.1, 474.4])
    assert (rising.growth_pct, rising.peak_growth_pct, rising.rose_at_every_sample) == (1.56, 1.56, True)
    settled = SoakResult()
    describe_growth(settled, 441.0, [441.6, 441.9, 441.9, 442.2, 442.1])
    assert (settled.growth_pct, settled.peak_growth_pct) == (0.25, 0.27)
    assert (settled.intervals_rising, settled.intervals_flat, settled.intervals_falling) == (3, 1, 1)
    assert not settled.rose_at_every_sample


def test_the_check_sees_torch_objects_on_a_doc(nlp):
    doc = nlp("three short words")
    assert holds_only_numpy(doc)
    layers = doc._.elmo.layers
    for held in (torch.from_numpy(layers.copy()), torch.from_numpy(layers.copy()).numpy(), layers[:, :1]):
        doc._.elmo = ElmoOutput(layers=held)
        assert not holds_only_numpy(doc), type(held)
    doc._.elmo = ElmoOutput(layers=layers)
    doc.user_data["kept"] = torch.zeros(1)
    assert not holds_only_numpy(doc)
    doc.user_data["kept"] = np.zeros(1)
    assert holds_only_numpy(doc)
