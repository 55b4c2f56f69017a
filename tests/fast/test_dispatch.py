"""The dispatch: which run path each kind of call takes, and that a model without a runner is the reference."""
import pytest
import torch

from spacy_elmo.fast import attach, compiled, detach, dispatch, optimize_for_inference, precision
from spacy_elmo.fast.dispatch import PATHS

from ..bilm.sentences import layers
from ..conftest import random_bilm


def stack_inputs(bilm, requires_grad=False):
    x = torch.zeros(2, 3, bilm.config.projection_dim, requires_grad=requires_grad)
    return (x, x)


def layer_path(bilm, requires_grad):
    layer = bilm.forward_lstm.layers[0]
    projected = torch.zeros(3, 2, 4 * layer.dim, requires_grad=requires_grad)
    state = (torch.zeros(2, layer.projection_dim), torch.zeros(2, layer.dim))
    return bilm.runner.layer_path(layer, projected, state)


def test_each_kind_of_call_takes_its_documented_path(monkeypatch):
    bilm = random_bilm(seed=1)
    attach(bilm)  # exact
    assert bilm.runner.stack_path(bilm.forward_lstm, bilm.backward_lstm, stack_inputs(bilm)) is None
    assert layer_path(bilm, requires_grad=False) == "in_place"
    assert layer_path(bilm, requires_grad=True) == "train_step"
    with dispatch.op_by_op():
        assert layer_path(bilm, requires_grad=True) == "reference"
    with torch.autocast("cpu", dtype=torch.bfloat16):  # the node runs its products in bfloat16
        assert layer_path(bilm, requires_grad=True) == "train_step"
    with torch.autocast("cpu", dtype=torch.float16):
        assert layer_path(bilm, requires_grad=True) == "reference"

    optimize_for_inference(bilm)
    with torch.no_grad():
        path = bilm.runner.stack_path(bilm.forward_lstm, bilm.backward_lstm, stack_inputs(bilm))
        assert path == ("compiled" if compiled.compiled_step() is not None else "lockstep")
        with dispatch.python_step():
            assert bilm.runner.stack_path(bilm.forward_lstm, bilm.backward_lstm, stack_inputs(bilm)) == "lockstep"
    # autograd never runs in lockstep
    assert bilm.runner.stack_path(bilm.forward_lstm, bilm.backward_lstm, stack_inputs(bilm, True)) is None
    # bf16 stand-ins on every CPU (the check that would fall back to fp32 told yes)
    monkeypatch.setattr(precision, "cpu_has_bf16", lambda: True)
    optimize_for_inference(bilm, precision="bf16")
    with torch.no_grad():
        assert bilm.runner.stack_path(bilm.forward_lstm, bilm.backward_lstm, stack_inputs(bilm)) == "lockstep_bf16"
    # a module hook (training's dropout) runs the directions one after the other, through the hook
    optimize_for_inference(bilm)
    bilm.backward_lstm.layers[1].register_forward_pre_hook(lambda module, args: None)
    with torch.no_grad():
        assert bilm.runner.stack_path(bilm.forward_lstm, bilm.backward_lstm, stack_inputs(bilm)) is None
    assert set(PATHS) == {"reference", "train_step", "compiled", "lockstep", "lockstep_bf16", "lockstep_int8", "in_place"}


def test_a_model_without_a_runner_runs_the_reference_loop(monkeypatch):
    bilm = random_bilm(seed=2)
    calls = []
    original = type(bilm.forward_lstm.layers[0]).steps
    monkeypatch.setattr(type(bilm.forward_lstm.layers[0]), "steps", lambda self, *a: calls.append(1) or original(self, *a))
    reference = layers(bilm).layers
    assert bilm.runner is None and len(calls) == 2 * bilm.config.n_layers
    attach(bilm)
    calls.clear()
    assert torch.equal(layers(bilm).layers, reference) and not calls  # the in-place loop, bitwise
    detach(bilm)
    assert torch.equal(layers(bilm).layers, reference) and calls


@pytest.mark.parametrize("exact", [True, False])
def test_a_runner_is_not_saved_with_the_weights(exact):
    bilm = random_bilm(seed=3)
    optimize_for_inference(bilm, exact=exact)
    assert bilm.runner.exact is exact
    # the model's one runner slot: its layers and token encoder hold nothing of the runner's
    assert not any(hasattr(module, "runner") for module in bilm.modules() if module is not bilm)
    assert not hasattr(bilm.token_encoder, "cache") and bilm.runner.char_cache is None
    assert not any("runner" in key for key in bilm.state_dict())


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_an_optimized_model_under_autocast_runs_the_reference_loop_and_matches_the_plain_one(dtype):
    """autocast (a GPU user's fp16) picks each op's dtype: the in-place and lockstep loops, which
    write into float32 buffers, used to fail with mixed dtypes; the reference loop follows it."""
    sentences = [["The", "bank", "raised", "rates", "."], ["We", "sat", "by", "the", "river"]]
    plain, optimized = random_bilm(seed=3), random_bilm(seed=3)
    optimize_for_inference(optimized, char_cache_size=100)
    optimized.embed(sentences)  # float32 encodings in the char cache first
    with torch.autocast("cpu", dtype=dtype):
        with torch.no_grad():
            assert optimized.runner.stack_path(optimized.forward_lstm, optimized.backward_lstm, stack_inputs(optimized)) is None
            assert layer_path(optimized, requires_grad=False) == "reference"
        expected, got = plain.embed(sentences), optimized.embed(sentences)
    for e, g in zip(expected, got):
        assert g.dtype == e.dtype and g.shape == e.shape
        assert abs(g - e).max() < 1e-3
    # the cache kept its float32 encodings: outside autocast the optimized path is as before
    assert optimized.runner.char_cache is not None
    for e, g in zip(plain.embed(sentences), optimized.embed(sentences)):
        assert abs(g - e).max() < 1e-5
