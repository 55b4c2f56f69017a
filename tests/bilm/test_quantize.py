"""Reduced-precision linear layers: close to fp32, reversible, and following weight updates."""
import pytest
import torch
from torch import nn

from spacy_elmo.bilm import batch_char_ids
from spacy_elmo.bilm.inference.fast import optimize_for_inference
from spacy_elmo.bilm.inference.quantize import ReducedPrecisionLinear, reduce_precision

from ..conftest import random_bilm
from .sentences import SENTENCES, layers


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
