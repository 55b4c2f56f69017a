"""The fast inference paths give the plain computation's results: LSTM step, token encoder, fast modes."""
import numpy as np
import pytest
import torch
from torch import nn

from spacy_elmo.bilm import batch_char_ids, token_char_ids
from spacy_elmo.bilm.fast import optimize_for_inference
from spacy_elmo.bilm.lstm import LSTMPLayer, _tanh_via_sigmoid_
from spacy_elmo.bilm.quantize import ReducedPrecisionLinear, reduce_precision

from ..conftest import random_bilm

SENTENCES = [
    ["The", "bank", "raised", "its", "rates", "."],
    ["We", "sat", "on", "the", "river", "bank", "all", "afternoon", "."],
    ["a" * 60, "naïve", "日本語", "x"],
    [],
    ["the", "the", "the"],
]


def layers(bilm, sentences=SENTENCES):
    ids, lengths = batch_char_ids(sentences)
    with torch.no_grad():
        return bilm(torch.from_numpy(ids), torch.from_numpy(lengths))


def test_in_place_step_equals_autograd_step():
    torch.manual_seed(0)
    layer = LSTMPLayer(6, 12, 5, cell_clip=0.5, proj_clip=0.4)
    inputs = torch.randn(4, 7, 6) * 3
    batch_sizes = [4, 4, 3, 3, 2, 1, 0]
    state = (torch.randn(4, 5), torch.randn(4, 12))
    with torch.no_grad():
        fast_out, (fast_h, fast_c) = layer(inputs, batch_sizes, state)
    slow_out, (slow_h, slow_c) = layer(inputs.requires_grad_(), batch_sizes, state)
    torch.testing.assert_close(fast_out, slow_out.detach(), atol=1e-6, rtol=0)
    torch.testing.assert_close(fast_h, slow_h.detach(), atol=1e-6, rtol=0)
    torch.testing.assert_close(fast_c, slow_c.detach(), atol=1e-6, rtol=0)
    assert fast_out[1, 6].abs().max() == 0 and fast_out[0, 6].abs().max() == 0  # zero past each row's end
    # the caller's state is not modified in place
    assert state[1].requires_grad is False and not torch.equal(state[1], fast_c)


def test_token_encoder_equals_full_width_convolutions():
    bilm = random_bilm(seed=2, filters=((1, 4), (2, 4), (3, 8), (5, 8)))
    enc = bilm.token_encoder
    generator = torch.Generator().manual_seed(0)
    rows = [token_char_ids(t) for t in ["a", "bank", "b" * 47, "c" * 48, "é" * 30, "<S>", "</S>", ""]]
    ids = torch.from_numpy(np.stack(rows))
    # arbitrary ids, including rows whose filler is not the PAD id, and an all-padding row
    noise = torch.randint(1, 262, (6, 50), generator=generator)
    noise[:3, 20:] = 7
    ids = torch.cat([ids, noise, torch.zeros(1, 50, dtype=torch.long), ids[:2]])
    with torch.no_grad():
        embedded = enc.char_embedding(ids).transpose(1, 2)
        pooled = torch.cat([torch.relu(conv(embedded).max(dim=-1).values) for conv in enc.convolutions], dim=-1)
        expected = enc.projection(enc.highway(pooled))
        got = enc(ids)
    torch.testing.assert_close(got, expected, atol=1e-6, rtol=0)
    # bitwise: repeated rows are encoded once and gathered
    torch.testing.assert_close(got[-2:], got[:2], atol=0, rtol=0)


def test_fp32_optimization_keeps_outputs_and_state_dict():
    plain = random_bilm(seed=4)
    fast = optimize_for_inference(random_bilm(seed=4), char_cache_size=100)
    expected, got = layers(plain), layers(fast)
    torch.testing.assert_close(got.layers, expected.layers, atol=1e-5, rtol=0)
    for (name, a), (_, b) in zip(plain.state_dict().items(), fast.state_dict().items()):
        assert torch.equal(a, b), name
    assert fast.forward_lstm.layers[0].state_linearity.weight.t().is_contiguous()
    assert fast.forward_lstm.layers[0].tanh_via_sigmoid
    assert len(fast.token_encoder.cache) > 0
    # exact=True undoes the rounding-level changes: bit-identical to the plain model again
    optimize_for_inference(fast, exact=True)
    assert fast.forward_lstm.layers[0].state_linearity.weight.is_contiguous()
    torch.testing.assert_close(layers(fast).layers, expected.layers, atol=0, rtol=0)


def test_tanh_via_sigmoid_close_to_tanh():
    x = torch.linspace(-20, 20, 4001)
    torch.testing.assert_close(_tanh_via_sigmoid_(x.clone()), torch.tanh(x), atol=2.5e-7, rtol=0)
    big = torch.randn(2, 64, 4096) * 4
    torch.testing.assert_close(_tanh_via_sigmoid_(big.clone()), torch.tanh(big), atol=2.5e-7, rtol=0)


def test_char_cache_hits_and_results_match():
    """Bitwise: with exact=True the misses are encoded in the same batch of distinct tokens as the
    plain model's, and a hit returns the stored row."""
    bilm = random_bilm(seed=5)
    expected = layers(bilm).layers
    optimize_for_inference(bilm, char_cache_size=1000, exact=True)
    first = layers(bilm).layers
    cache = bilm.token_encoder.cache
    assert cache.hits == 0 and cache.misses > 0
    second = layers(bilm).layers
    assert cache.hits == cache.misses  # every distinct token of the second call was cached
    torch.testing.assert_close(first, expected, atol=0, rtol=0)
    torch.testing.assert_close(second, expected, atol=0, rtol=0)


def test_char_cache_forgets_when_weights_change():
    bilm = optimize_for_inference(random_bilm(seed=6), char_cache_size=1000)
    layers(bilm)
    with torch.no_grad():
        bilm.token_encoder.highway.transform[0].weight.mul_(1.5)
    reference = random_bilm(seed=6)
    with torch.no_grad():
        reference.token_encoder.highway.transform[0].weight.mul_(1.5)
    torch.testing.assert_close(layers(bilm).layers[0], layers(reference).layers[0], atol=1e-6, rtol=0)


def test_char_cache_unused_when_training_or_with_grad():
    bilm = optimize_for_inference(random_bilm(seed=7), char_cache_size=1000)
    layers(bilm)
    cache = bilm.token_encoder.cache
    assert len(cache) > 0
    ids, lengths = batch_char_ids(SENTENCES[:2])
    out = bilm(torch.from_numpy(ids), torch.from_numpy(lengths))  # eval mode, autograd on
    out.layers.sum().backward()
    assert bilm.token_encoder.char_embedding.weight.grad is not None
    assert cache.hits == 0
    bilm.train()
    layers(bilm)  # training mode, autograd off
    assert cache.hits == 0
    optimizer = torch.optim.SGD(bilm.parameters(), lr=0.1)
    optimizer.step()  # the gradients above change the encoder's weights in place
    bilm.eval()
    reference = random_bilm(seed=7)
    reference.load_state_dict(bilm.state_dict())
    torch.testing.assert_close(layers(bilm).layers, layers(reference).layers, atol=1e-5, rtol=0)
    assert cache.hits == 0  # refilled from scratch: nothing from before the step was reused


def test_char_cache_is_bounded_and_vocab_fill_stays():
    bilm = optimize_for_inference(random_bilm(seed=8), char_cache_size=4)
    layers(bilm)
    assert len(bilm.token_encoder.cache) == 4
    optimize_for_inference(bilm, char_cache_size=5, vocab=["the", "the", "<S>", "bank", ".", "rates", "river"])
    cache = bilm.token_encoder.cache
    assert len(cache) == 5
    layers(bilm)
    # <S> and </S> come first (every sentence has them), then "the", "bank", "." (repeats take no
    # slot); nothing else admitted
    assert len(cache) == 5 and cache.hits == 5
    optimize_for_inference(bilm, char_cache_size=1, vocab=["the"])
    assert len(bilm.token_encoder.cache) == 1
    layers(bilm)
    assert bilm.token_encoder.cache.hits == 1  # <S>


@pytest.mark.parametrize("precision", ["fp16", "int8", "bf16"])
def test_reduced_precision_close_and_reversible(precision):
    plain = random_bilm(seed=9, dim=64, projection_dim=32)
    reference = layers(plain).layers
    fast = optimize_for_inference(random_bilm(seed=9, dim=64, projection_dim=32), precision=precision)
    assert sorted(fast.state_dict()) == sorted(plain.state_dict())
    got = layers(fast).layers
    valid = reference.abs().sum(-1) > 0
    cos = nn.functional.cosine_similarity(got[valid], reference[valid], dim=-1)
    assert cos.mean() > 0.999 and cos.min() > 0.99
    assert not torch.equal(got, reference)
    # training falls back to float32 and the fp32 setting undoes the fast mode
    fast.train()
    ids, lengths = batch_char_ids(SENTENCES[:2])
    fast(torch.from_numpy(ids), torch.from_numpy(lengths)).layers.sum().backward()
    assert fast.forward_lstm.layers[0].state_linearity.weight.grad is not None
    optimize_for_inference(fast, precision="fp32")
    assert not any(isinstance(m, ReducedPrecisionLinear) for m in fast.modules())
    torch.testing.assert_close(layers(fast).layers, reference, atol=1e-5, rtol=0)


def test_reduced_precision_linear_follows_weight_updates():
    torch.manual_seed(0)
    holder = nn.Sequential(nn.Linear(16, 8))
    reduce_precision(holder, "int8")
    layer = holder[0]
    assert isinstance(layer, ReducedPrecisionLinear) and layer.precision == "int8"
    x = torch.randn(3, 16)
    with torch.no_grad():
        before = layer(x)
        layer.weight.mul_(2.0)
        after = layer(x)
        expected = nn.functional.linear(x, layer.weight, layer.bias)
    torch.testing.assert_close(after, expected, atol=0.05, rtol=0.05)
    assert not torch.allclose(before, after)


def test_rejects_unknown_precision_and_negative_cache():
    bilm = random_bilm()
    with pytest.raises(ValueError, match="precision"):
        optimize_for_inference(bilm, precision="int4")
    with pytest.raises(ValueError, match="char_cache_size"):
        optimize_for_inference(bilm, char_cache_size=-1)


def test_char_cache_copies_and_threads():
    """Threads sharing one cache get the single-threaded outputs up to rounding.

    Not bitwise: which tokens hit the (tiny, constantly evicting) cache depends on how the
    threads interleave, and a missed token is encoded in a batch of another shape, which
    may round differently (one float32 ulp on some CPUs). A race in the cache would instead
    hand a token another token's encoding or a half-written row: errors of the size of the
    activations, checked below to be far above the tolerance.
    """
    import copy
    import threading

    bilm = optimize_for_inference(random_bilm(seed=10), char_cache_size=3)  # small: constant eviction
    expected = layers(bilm).layers
    tolerance = {"atol": 1e-5, "rtol": 1e-5}
    # distinct tokens' encodings (layer 0) differ by far more than the tolerance, so a row that
    # went to the wrong token fails the comparison
    rows = {}
    for i, sentence in enumerate(SENTENCES):
        for j, token in enumerate(sentence):
            rows.setdefault(token, expected[0, i, j + 1])  # position 0 is <S>
    encodings = torch.stack(list(rows.values()))
    gaps = (encodings[:, None] - encodings[None]).abs().amax(-1)
    assert gaps[~torch.eye(len(rows), dtype=torch.bool)].min() > 1000 * tolerance["atol"]
    twin = copy.deepcopy(bilm)  # parameters are copied one by one: the directions run unpaired
    torch.testing.assert_close(layers(twin).layers, expected, atol=1e-6, rtol=0)
    assert len(twin.token_encoder.cache) == 3
    errors = []

    def work():
        try:
            for _ in range(5):
                torch.testing.assert_close(layers(bilm).layers, expected, **tolerance)
        except Exception as err:  # reported below, in the main thread
            errors.append(err)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == [] and len(bilm.token_encoder.cache) == 3
