"""Property-based tests of the `elmo` component on messy Docs.

The long run of the same checks: ``python -m lab.reliability.fuzz_long --docs 10000 --output FILE``.
"""
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from spacy.tokens import Doc

from spacy_elmo.io import load_allennlp

from lab.reliability.fuzz import PIPELINE_SETTINGS, batches, build_doc, check_batch, fuzz_pipelines

from ..conftest import load_tiny_bilm

PIPELINES = fuzz_pipelines(load_tiny_bilm)
# a 200-token window that lab/reliability/fuzz_long.py found to depend on its batch mates by > 1e-5
WINDOW = json.loads((Path(__file__).parent / "data" / "batch_mates_window.json").read_text("utf-8"))["tokens"]
FUZZ = settings(max_examples=25, deadline=None, database=None, derandomize=True, suppress_health_check=list(HealthCheck))


@pytest.mark.slow
@FUZZ
@given(specs=batches, batch_size=st.integers(1, 9), name=st.sampled_from(sorted(PIPELINE_SETTINGS)))
def test_any_docs_in_any_batch_give_finite_vectors_independent_of_batch_mates(specs, batch_size, name):
    check_batch(PIPELINES[name], specs, batch_size)


@pytest.mark.parametrize("name", sorted(PIPELINE_SETTINGS))
def test_hand_picked_batch(name):
    # the cases the generator reaches only by luck, all in one batch with a long Doc among short ones
    specs = [
        ("words", [], [], None),
        ("text", ""),
        ("text", " \n\t\u3000 "),
        ("text", "a\x00b \x1b[0m e\u0301 👩\u200d👩\u200d👧 \u202eabc \ufeff"),
        ("words", ["\x00"], [False], None),
        ("words", [" ", "\n", "x" * 1000, "é" * 500], [True, False, True, False], [True, False, True, None]),
        ("words", [f"w{i % 13}" for i in range(2500)], [True] * 2500, [i % 9 == 0 for i in range(2500)]),
        ("words", ["<S>", "</S>", "<S>"], [True, True, False], None),
    ]
    nlp = PIPELINES[name]
    assert check_batch(nlp, specs, batch_size=3).tokens == sum(len(build_doc(nlp, spec)) for spec in specs) > 1500


def test_lone_surrogates_are_stopped_by_spacy_and_the_pipeline_keeps_working():
    nlp = PIPELINES["defaults"]
    for words in (["\ud800"], ["a", "b\udfff"], ["\udc80\ud800"]):
        with pytest.raises(UnicodeEncodeError):
            Doc(nlp.vocab, words=words)
    with pytest.raises(UnicodeEncodeError):
        list(nlp.pipe(["fine", "not \ud800 fine"]))
    doc = nlp("still fine")
    assert doc._.elmo.layers.shape == (3, 2, 32) and np.isfinite(doc._.elmo.layers).all()


@pytest.mark.parametrize("mate_length", [1, 100])
def test_regression_long_window_batch_mates(mate_length, trained_paths):
    # float32 matrix products round differently for different batch sizes. In a trained biLM
    # the recurrence damps that (the contract: 1e-5); the tiny fixture's random recurrent
    # weights amplify it along a 200-token window to 2e-5..6e-5 (float64 gives 0.0), so that
    # model gets a documented 1e-4 bound.
    nlp = PIPELINES["defaults"]
    [alone] = nlp.get_pipe("elmo").bilm.embed([WINDOW])
    mate = Doc(nlp.vocab, words=[f"m{i % 7}" for i in range(mate_length)])
    [doc, _] = nlp.pipe([Doc(nlp.vocab, words=WINDOW), mate], batch_size=2)
    np.testing.assert_allclose(doc._.elmo.layers, alone, atol=1e-4)
    trained = load_allennlp(*trained_paths)
    [alone] = trained.embed([WINDOW])
    [together, _] = trained.embed([WINDOW, [f"m{i % 7}" for i in range(mate_length)]], batch_size=2)
    np.testing.assert_allclose(together, alone, atol=1e-5)
