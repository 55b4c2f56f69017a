"""Soak, CI-sized: 3,000 short Docs through nlp.pipe with RSS sampled.

The long run: ``python scripts/soak.py --docs 100000 --output FILE``.
"""
import numpy as np
import pytest
import torch

from spacy_elmo.data_classes import ElmoOutput

from spacy_elmo.reliability.fuzz import fuzz_pipelines
from spacy_elmo.reliability.soak import holds_only_numpy, short_texts, soak

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
    assert result.growth_pct < 5.0, result.samples


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
