"""Reduced-precision linear layers: close to fp32, reversible, and following weight updates."""
import pytest
import torch
from torch import nn

from spacy_elmo.bilm import batch_char_ids
from spacy_elmo.fast import forget_derived_weights, optimize_for_inference
from spacy_elmo.fast import precision as quantize
from spacy_elmo.fast.lockstep import lockstep_precision
from spacy_elmo.fast.precision import ReducedPrecisionLinear, reduce_precision

from ..conftest import random_bilm
from ..bilm.sentences import SENTENCES, layers


@pytest.fixture
def bf16_cpu(monkeypatch):
    """bf16 taken as supported, so its math is tested on any CPU (emulated: slow, still correct)."""
    monkeypatch.setattr(quantize, "cpu_has_bf16", lambda: True)


@pytest.mark.parametrize("precision", ["fp16", "int8", "bf16"])
def test_reduced_precision_close_and_reversible(precision, bf16_cpu):
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


def test_bf16_runs_both_directions_in_lockstep_on_bf16_weight_copies(bf16_cpu):
    plain = random_bilm(seed=4, dim=64, projection_dim=32)
    reference = layers(plain).layers
    fast = optimize_for_inference(random_bilm(seed=4, dim=64, projection_dim=32), precision="bf16")
    pairs = list(zip(fast.forward_lstm.layers, fast.backward_lstm.layers))
    assert lockstep_precision(pairs) == "bf16"
    got = layers(fast).layers
    valid = reference.abs().sum(-1) > 0
    cos = nn.functional.cosine_similarity(got[valid], reference[valid], dim=-1)
    assert cos.min() > 0.999
    first = fast.forward_lstm.layers[0]
    key, copies = first._bf16_paired
    assert all(w.dtype == torch.bfloat16 for w in copies)
    layers(fast)
    assert first._bf16_paired[1] is copies  # made once per weights version
    with torch.no_grad():
        first.state_linearity.weight.mul_(0.5)  # the paired weights change: copies are remade
    changed = layers(fast).layers
    assert first._bf16_paired[1] is not copies and not torch.allclose(changed, got)
    forget_derived_weights(fast)  # after writes torch does not count (thinc's optimizers)
    assert not hasattr(first, "_bf16_paired")
    # a mix of precisions (or anything else) runs the directions one after the other
    reduce_precision(fast.backward_lstm.layers[0], "int8")
    assert lockstep_precision(pairs) is None


def test_bf16_without_hardware_support_warns_and_runs_fp32(monkeypatch):
    monkeypatch.setattr(quantize, "cpu_has_bf16", lambda: False)
    plain = random_bilm(seed=5, dim=64, projection_dim=32)
    with pytest.warns(RuntimeWarning, match="AVX512-BF16 or AMX"):
        fast = optimize_for_inference(random_bilm(seed=5, dim=64, projection_dim=32), precision="bf16")
    assert not any(isinstance(m, ReducedPrecisionLinear) for m in fast.modules())
    torch.testing.assert_close(layers(fast).layers, layers(plain).layers, atol=1e-5, rtol=0)


def test_cpu_has_bf16_counts_bf16_units_not_amx_tiles_alone(monkeypatch):
    assert not quantize.cpu_has_bf16(["avx2", "avx512f", "amx_tile"])  # tiles without their bf16 unit
    assert quantize.cpu_has_bf16(["avx2", "amx_tile", "amx_bf16"])
    assert quantize.cpu_has_bf16(["avx512f", "avx512_bf16"])
    assert not quantize.cpu_has_bf16([])
    # this machine: what its kernel reports
    flags = quantize._kernel_cpu_flags()
    if flags is not None:
        assert quantize.cpu_has_bf16() == ("avx512_bf16" in flags or "amx_bf16" in flags)
    # without kernel flags, torch's AVX512-BF16 probe decides and its AMX tile probe does not
    monkeypatch.setattr(quantize, "_kernel_cpu_flags", lambda: None)
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: False, raising=False)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: True, raising=False)
    assert not quantize.cpu_has_bf16()
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: True, raising=False)
    assert quantize.cpu_has_bf16()
