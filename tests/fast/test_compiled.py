"""The compiled timestep loop: the Python loop's results, used by the optimized path only, and
switched off by the environment or ``python_step``."""
import numpy as np
import pytest
import torch

from spacy_elmo.fast import compiled, dispatch, kernel_library
from spacy_elmo.fast import optimize_for_inference
from spacy_elmo.bilm.lstm import LSTMPLayer
from spacy_elmo.fast.in_place import run_in_place

from ..conftest import load_tiny_bilm, random_bilm
from ..bilm.sentences import layers

needs_compiler = pytest.mark.skipif(kernel_library.compiler() is None, reason="no C++ compiler here")


def pair_inputs(batch_sizes, dim=16, proj=8, clip=3.0, scale=1.0, seed=0):
    generator = torch.Generator().manual_seed(seed)
    batch = batch_sizes[0] if batch_sizes else 2
    pair = [LSTMPLayer(proj, dim, proj, clip, clip) for _ in range(2)]
    projected = torch.randn(2, sum(batch_sizes), 4 * dim, generator=generator) * scale
    # weights at the scale of an initialized model (scale 30 saturates the gates)
    weights = (
        torch.randn(2, proj, 4 * dim, generator=generator) * scale / proj**0.5,
        torch.randn(2, dim, proj, generator=generator) / dim**0.5,
    )
    states = [(torch.randn(batch, proj, generator=generator), torch.randn(batch, dim, generator=generator)) for _ in pair]
    return pair, projected, states, weights


@needs_compiler
@pytest.mark.parametrize(
    "batch_sizes,clip,scale",
    [([3, 3, 2, 1], 3.0, 1.0), ([1] * 12, None, 1.0), ([4, 4, 4], 0.5, 30.0), ([5, 2, 0, 0], None, 30.0), ([], 3.0, 1.0)],
)
def test_compiled_loop_gives_the_python_loops_results(batch_sizes, clip, scale):
    pair, projected, states, weights = pair_inputs(batch_sizes, clip=clip, scale=scale)
    before = [(h.clone(), c.clone()) for h, c in states]
    expected, expected_finals = run_in_place(pair, projected, batch_sizes, states, weights, packed=True, fused=True)
    got, finals = compiled.run_pair_compiled(pair, projected, batch_sizes, states, weights)
    assert got.shape == expected.shape
    # saturated gates (scale 30) included: no NaN from the fast-math reciprocal, clipping exact
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=0)
    for (h1, c1), (h2, c2) in zip(expected_finals, finals):
        torch.testing.assert_close(h2, h1, atol=1e-5, rtol=0)
        torch.testing.assert_close(c2, c1, atol=1e-5, rtol=0)
    if clip is not None and got.numel():
        assert got.abs().max() <= clip
    for (h, c), (h0, c0) in zip(states, before):  # the initial states are not modified
        assert torch.equal(h, h0) and torch.equal(c, c0)


@needs_compiler
def test_the_op_refuses_wrong_shapes_with_a_message():
    pair, projected, states, weights = pair_inputs([2, 1])
    with pytest.raises(RuntimeError, match="projected shape"):
        compiled.run_pair_compiled(pair, projected[:, :2].contiguous(), [2, 1], states, weights)
    with pytest.raises(RuntimeError, match="batch sizes must not grow"):
        compiled.run_pair_compiled(pair, projected, [1, 2], states, weights)
    with pytest.raises(RuntimeError, match="weight or state shape"):
        compiled.run_pair_compiled(pair, projected, [2, 1], states, (weights[0][:, :4], weights[1]))


@needs_compiler
def test_the_optimized_model_takes_the_compiled_loop_and_the_exact_one_does_not(monkeypatch, tiny_sentences, tiny_expected):
    calls = []
    original = compiled.run_pair_compiled
    monkeypatch.setattr(compiled, "run_pair_compiled", lambda *a: calls.append(1) or original(*a))
    bilm = optimize_for_inference(load_tiny_bilm())
    got = bilm.embed(tiny_sentences, batch_size=len(tiny_sentences))
    assert len(calls) == 2  # one call per layer pair
    for i, layers_i in enumerate(got):  # the reference implementation's outputs
        np.testing.assert_allclose(layers_i, tiny_expected[f"layers_{i}"], atol=1e-5, err_msg=f"sentence {i}")
    with dispatch.python_step():
        python = bilm.embed(tiny_sentences, batch_size=len(tiny_sentences))
    for a, b in zip(got, python):
        np.testing.assert_allclose(a, b, atol=1e-5, rtol=0)
    optimize_for_inference(bilm, exact=True)
    layers(bilm, tiny_sentences)
    monkeypatch.setenv(kernel_library.ENV, "0")
    layers(optimize_for_inference(random_bilm(seed=3)))
    assert len(calls) == 2


def test_switched_off_by_the_environment_or_python_step(monkeypatch):
    bilm = optimize_for_inference(random_bilm(seed=3))
    inputs = (torch.zeros(1, 2, bilm.config.projection_dim),) * 2

    def path():
        with torch.no_grad():
            return bilm.runner.stack_path(bilm.forward_lstm, bilm.backward_lstm, inputs)

    monkeypatch.setenv(kernel_library.ENV, "0")
    assert compiled.compiled_step() is None and not kernel_library.enabled() and path() == "lockstep"
    monkeypatch.setenv(kernel_library.ENV, "1")
    assert kernel_library.enabled()
    assert path() == ("compiled" if compiled.compiled_step() is not None else "lockstep")
    with dispatch.python_step():
        assert path() == "lockstep"
