"""The oneDNN route of the fp32 products: torch's results to float32 rounding, a row's result the same
in any batch, weights packed again whenever they change, and a sentence's layers bitwise equal alone,
in a batch and from the cache on fresh instances."""
import contextlib
import copy
import pickle

import numpy as np
import pytest
import torch
from torch import nn

from spacy_elmo.fast import detach, forget_derived_weights, optimize_for_inference, prepacked, python_step
from spacy_elmo.fast import compiled
from spacy_elmo.fast.in_place import run_in_place
from spacy_elmo.fast.optimize import use_routes
from spacy_elmo.fast.prepacked import ONEDNN, TORCH, TORCH_ROUTES, PrepackedConv1d, PrepackedLinear, Routes

from ..bilm.sentences import SENTENCES, layers
from ..conftest import load_tiny_bilm, random_bilm
from .test_compiled import needs_compiler, pair_inputs

pytestmark = pytest.mark.skipif(not prepacked.available(), reason="this torch has no oneDNN linear ops")
ONEDNN_ROUTES = Routes(ONEDNN, ONEDNN)
WORDS = "the bank raised its rates while we sat on the river bank all afternoon and talked of money . naïve 日本語".split()


def random_sentences(count, seed=0):
    rng = np.random.default_rng(seed)
    return [[WORDS[i] for i in rng.integers(0, len(WORDS), rng.integers(1, 30))] for _ in range(count)]


@pytest.mark.parametrize("rows,width,out", [(1, 16, 64), (2, 16, 64), (7, 33, 20), (300, 64, 128), (0, 8, 4)])
def test_products_are_torchs_to_float32_rounding_and_each_row_is_the_same_in_any_batch(rows, width, out):
    generator = torch.Generator().manual_seed(rows)
    x, weight = torch.randn(rows, width, generator=generator), torch.randn(out, width, generator=generator)
    bias, add = torch.randn(out, generator=generator), torch.randn(rows, out, generator=generator)
    packed = prepacked.pack(weight)
    y = prepacked.product(x, packed, bias, add)
    assert y.shape == (rows, out)
    torch.testing.assert_close(y, torch.addmm(bias + add, x, weight.t()), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(prepacked.product(x, packed), x @ weight.t(), rtol=1e-5, atol=1e-5)
    for r in range(min(rows, 3)):
        assert torch.equal(prepacked.product(x[r : r + 1], packed, bias, add[r : r + 1]), y[r : r + 1])


def test_the_stand_ins_share_the_parameters_and_are_the_plain_layers_under_autograd():
    linear, conv = nn.Linear(6, 5), nn.Conv1d(3, 4, 2)
    fast_linear, fast_conv = PrepackedLinear(linear), PrepackedConv1d(conv)
    assert fast_linear.weight is linear.weight and fast_conv.bias is conv.bias
    assert list(fast_linear.state_dict()) == list(linear.state_dict())
    x, chars = torch.randn(4, 6, requires_grad=True), torch.randn(5, 3, 9)
    assert torch.equal(fast_linear(x), linear(x))  # autograd on: the plain layer
    with torch.no_grad():
        torch.testing.assert_close(fast_linear(x), linear(x), rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(fast_conv(chars), conv(chars), rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="stride 1 without padding"):
        PrepackedConv1d(nn.Conv1d(3, 4, 2, padding=1))


def test_packed_weights_are_made_again_after_an_optimizer_step_load_state_dict_and_forget():
    bilm = optimize_for_inference(random_bilm(seed=3))
    use_routes(bilm, ONEDNN_ROUTES)
    reference = random_bilm(seed=3)  # the same weights on the reference path
    models = (bilm, reference)

    def agree():
        torch.testing.assert_close(layers(bilm).layers, layers(reference).layers, rtol=0, atol=1e-5)

    agree()
    for model in models:
        for parameter in model.parameters():
            parameter.grad = torch.full_like(parameter, 0.01)
        torch.optim.SGD(model.parameters(), lr=1.0).step()
    agree()
    for model in models:
        model.load_state_dict(random_bilm(seed=4).state_dict())
    agree()
    with torch.no_grad():  # writes torch does not count: forget_derived_weights catches them
        for model in models:
            for parameter in model.parameters():
                parameter.data.mul_(0.5)
    forget_derived_weights(bilm)
    agree()


def test_a_model_on_the_onednn_route_copies_pickles_and_goes_back_to_torchs_route():
    bilm = optimize_for_inference(random_bilm(seed=5))
    use_routes(bilm, ONEDNN_ROUTES)
    expected = layers(bilm).layers
    assert isinstance(bilm.token_encoder.highway.carry[0], PrepackedLinear)
    assert all(isinstance(conv, PrepackedConv1d) for conv in bilm.token_encoder.convolutions)
    twin = pickle.loads(pickle.dumps(copy.deepcopy(bilm)))
    torch.testing.assert_close(layers(optimize_for_inference(twin)).layers, expected, rtol=0, atol=1e-5)
    optimize_for_inference(bilm, precision="fp16")
    assert not any(isinstance(m, (PrepackedLinear, PrepackedConv1d)) for m in bilm.modules())
    use_routes_refused = optimize_for_inference(random_bilm(seed=5), exact=True)
    with pytest.raises(ValueError, match="optimized for inference in fp32"):
        use_routes(use_routes_refused, ONEDNN_ROUTES)
    with pytest.raises(ValueError, match="route must be one of"):
        prepacked.route_layers(bilm, "mkl")


@pytest.mark.parametrize("compiled_loop", [True, False])
def test_the_onednn_route_gives_the_torch_routes_results_to_float32_rounding(compiled_loop):
    bilm = optimize_for_inference(load_tiny_bilm())
    sentences = SENTENCES + random_sentences(6)
    use_routes(bilm, TORCH_ROUTES)
    expected = layers(bilm, sentences).layers
    use_routes(bilm, ONEDNN_ROUTES)
    if compiled_loop:
        got = layers(bilm, sentences).layers
    else:
        with python_step():
            got = layers(bilm, sentences).layers
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-5)


@pytest.mark.parametrize("char_cache_size", [0, 500])
@pytest.mark.parametrize("compiled_loop", [True, False])
def test_a_sentences_layers_are_bitwise_equal_alone_in_a_batch_of_32_and_from_the_cache(char_cache_size, compiled_loop):
    def fresh():  # two instances: within one, the caches would hand back what was computed before
        bilm = optimize_for_inference(load_tiny_bilm(), char_cache_size=char_cache_size)
        use_routes(bilm, ONEDNN_ROUTES)
        return bilm

    alone_model, batch_model = fresh(), fresh()
    sentences = random_sentences(40, seed=1)
    with python_step() if not compiled_loop else contextlib.nullcontext():
        alone = [alone_model.embed([sentence])[0] for sentence in sentences]
        batched = batch_model.embed(sentences, batch_size=32)
        again = batch_model.embed(sentences[:5], batch_size=32)
    assert all(np.array_equal(a, b) for a, b in zip(alone, batched))
    assert all(np.array_equal(a, b) for a, b in zip(alone, again))


def test_a_detached_model_runs_the_reference_on_torchs_products():
    bilm = optimize_for_inference(random_bilm(seed=6))
    use_routes(bilm, ONEDNN_ROUTES)
    detach(bilm)
    assert not any(isinstance(m, (PrepackedLinear, PrepackedConv1d)) for m in bilm.modules())
    # the weights stay paired (their layout, not their values): torch's products to float32 rounding
    torch.testing.assert_close(layers(bilm).layers, layers(random_bilm(seed=6)).layers, rtol=0, atol=1e-5)


def packs_of(weights):
    """``PairPacks`` for the (2, in, out) recurrent and projection weights of ``test_compiled.pair_inputs``."""
    state, projection = weights
    return prepacked.PairPacks(
        inputs=(), input_biases=(),
        state=tuple(prepacked.pack(w.t()) for w in state), projection=tuple(prepacked.pack(w.t()) for w in projection),
    )


@needs_compiler
@pytest.mark.parametrize("batch_sizes,clip", [([3, 3, 2, 1], 3.0), ([1] * 12, None), ([5, 2, 0, 0], 0.5), ([], 3.0)])
def test_the_compiled_loop_on_the_onednn_route_gives_the_python_loops_and_torchs_results(batch_sizes, clip):
    pair, projected, states, weights = pair_inputs(batch_sizes, clip=clip)
    packs = packs_of(weights)
    on_torch, _ = run_in_place(pair, projected, batch_sizes, states, weights, packed=True, fused=True)
    python, python_finals = run_in_place(pair, projected, batch_sizes, states, weights, packed=True, fused=True, onednn=packs)
    got, finals = compiled.run_pair_compiled(pair, projected, batch_sizes, states, weights, packs)
    torch.testing.assert_close(got, python, atol=1e-5, rtol=0)
    torch.testing.assert_close(got, on_torch, atol=1e-5, rtol=0)
    for (h1, c1), (h2, c2) in zip(python_finals, finals):
        torch.testing.assert_close(h2, h1, atol=1e-5, rtol=0)
        torch.testing.assert_close(c2, c1, atol=1e-5, rtol=0)


@needs_compiler
def test_the_compiled_loop_refuses_packs_of_the_wrong_shape_or_number():
    pair, projected, states, weights = pair_inputs([2, 1])
    packs = packs_of(weights)
    with pytest.raises(RuntimeError, match="one prepacked weight per direction"):
        compiled.run_pair_compiled(pair, projected, [2, 1], states, weights, packs._replace(state=packs.state[:1]))
    with pytest.raises(RuntimeError, match="prepacked weights of the wrong shape"):
        compiled.run_pair_compiled(pair, projected, [2, 1], states, weights, packs._replace(state=packs.projection))
