"""The model's inference settings: applied when the weights are set or change, not at every call."""
import ast
from pathlib import Path

import numpy as np
import pytest
import torch
from spacy.tokens import Doc
from spacy.vocab import Vocab

import spacy_elmo.fast.plan as fast_plan
import spacy_elmo.layers.bilm_model as bilm_model
from spacy_elmo.bilm import BiLM
from spacy_elmo.layers import ElmoBiLM, InferencePlan, apply_inference, get_bilm, set_bilm, set_inference, weights_updated

from ..conftest import random_bilm

PACKAGE = Path(bilm_model.__file__).resolve().parent.parent


def _model(**inference):
    model = ElmoBiLM(random_bilm(), max_window=50, batch_size=8, max_batch_items=None, trainable=True)
    set_inference(model, InferencePlan(**inference))
    return model


def _docs():
    return [Doc(Vocab(), words=["the", "bank", "of", "the", "river"]), Doc(Vocab(), words=["money", "in", "the", "bank"])]


@pytest.fixture()
def applications(monkeypatch):
    calls = []
    real = fast_plan.optimize_for_inference

    def counted(bilm, **settings):
        calls.append(dict(settings, precision=settings["precision"].name))  # the plan passes its Precision
        return real(bilm, **settings)

    monkeypatch.setattr(fast_plan, "optimize_for_inference", counted)
    return calls


def test_applied_once_then_again_only_when_the_weights_change(applications):
    model = _model(optimize=True, char_cache_size=100)
    first = model.predict(_docs())
    model.predict(_docs())
    model.predict(_docs())
    assert applications == [{"precision": "fp32", "char_cache_size": 100}]
    # a training step of a trainable biLM: back to the plain layout, weights moved
    outputs, backprop = model.begin_update(_docs())
    backprop([np.ones_like(o.layers) for o in outputs])
    with torch.no_grad():
        for p in get_bilm(model).parameters():
            p.add_(0.01)
    changed = model.predict(_docs())
    assert len(applications) == 2
    assert not np.allclose(first[0].layers, changed[0].layers, atol=1e-4)
    # writes torch does not count are announced
    weights_updated(model)
    model.predict(_docs())
    assert len(applications) == 3
    # a new biLM is a new state
    set_bilm(model, random_bilm(seed=5))
    model.predict(_docs())
    assert len(applications) == 4


def test_optimized_prediction_matches_plain_and_plain_is_untouched(applications):
    plain = _model(optimize=False)
    fast = _model(optimize=True)
    reference = plain.predict(_docs())
    outputs = fast.predict(_docs())
    assert len(applications) == 1
    for a, b in zip(reference, outputs):
        np.testing.assert_allclose(a.layers, b.layers, atol=1e-5)
    assert get_bilm(plain).runner.exact
    apply_inference(plain)  # optimize = False: nothing to do
    assert get_bilm(plain).runner.exact


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="precision must be one of"):
        InferencePlan(optimize=True, precision="fp8")
    with pytest.raises(ValueError, match="need optimize = true"):
        InferencePlan(optimize=False, char_cache_size=10)
    with pytest.raises(ValueError, match=">= 0"):
        InferencePlan(optimize=True, char_cache_size=-1)


def test_loading_keeps_the_settings_of_the_config():
    saved = _model(optimize=True, precision="fp32", char_cache_size=10)
    loaded = _model(optimize=True, precision="int8")
    loaded.from_bytes(saved.to_bytes())
    plan = loaded.attrs["inference"]
    assert (plan.optimize, plan.precision.name, plan.char_cache_size) == (True, "int8", 0)


def test_component_leaves_the_inference_machinery_to_the_model():
    """pipeline.py takes no speed path itself: nothing from spacy_elmo.fast's modules (the package's
    default cache size aside) and nothing of the model's timestep loops."""
    tree = ast.parse((PACKAGE / "pipeline.py").read_text(encoding="utf-8"))
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
    assert not {m for m in imported if m.startswith("fast.") or m in ("bilm.lstm", "bilm.model")}, imported
    names = {a.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module == "fast" for a in node.names}
    assert names <= {"DEFAULT_CHAR_CACHE_SIZE"}, names


def test_a_forward_pass_takes_the_weights_version_once(monkeypatch):
    """One walk over the biLM's parameters per batch, shared by the plan and the frozen cache; two
    when the settings are applied anew (their pairing replaces the weight tensors)."""
    import spacy_elmo.fast.char_cache as char_cache

    walks = []
    real = fast_plan.weights_version

    def counted(module):
        if isinstance(module, BiLM):  # whole-biLM walks (the char cache walks its encoder's alone)
            walks.append(module)
        return real(module)

    for module in (fast_plan, char_cache):
        monkeypatch.setattr(module, "weights_version", counted)
    plan = InferencePlan(optimize=True, char_cache_size=10)
    frozen = ElmoBiLM(
        random_bilm(), max_window=50, batch_size=8, max_batch_items=None, trainable=False, frozen_cache_mb=1, inference=plan
    )
    frozen.predict(_docs())
    assert len(walks) == 2
    for run in (lambda: frozen.predict(_docs()), lambda: frozen.begin_update(_docs())):
        walks.clear()
        run()
        assert len(walks) == 1
    trainable = _model(optimize=True)
    walks.clear()
    trainable.begin_update(_docs())
    assert walks == []  # a training step of a trainable biLM keys nothing on its weights


def test_the_thinc_layer_leaves_every_speed_decision_to_fast_plan():
    """bilm_model.py calls fast.plan (adopt, prepare_pass) and the package's public names; it reaches
    into no other fast/ module (pairing, dispatch, optimize, versions)."""
    tree = ast.parse((PACKAGE / "layers" / "bilm_model.py").read_text(encoding="utf-8"))
    modules = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
    assert {m for m in modules if m.startswith("fast")} == {"fast", "fast.plan"}, modules
    names = {a.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module == "fast.plan" for a in node.names}
    assert names == {"InferencePlan", "adopt", "prepare_pass"}
