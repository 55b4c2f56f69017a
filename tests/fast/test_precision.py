"""Reduced-precision linear layers: close to fp32, reversible, and following weight updates."""
import os
import warnings

import pytest
import torch
from torch import nn

from spacy_elmo.bilm import batch_char_ids
from spacy_elmo.fast import forget_derived_weights, optimize_for_inference
from spacy_elmo.fast import bf16_rows, int8_rows, lockstep, prepacked
from spacy_elmo.fast import precision as quantize
from spacy_elmo.fast.lockstep import runs_in_lockstep
from spacy_elmo.fast.plan import InferencePlan, adopt, prepare_pass
from spacy_elmo.fast.precision import BF16, FP16, FP32, INT8, ReducedPrecisionLinear, reduce_precision

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
    holder.eval()  # in training mode the layer runs in float32
    layer = holder[0]
    assert isinstance(layer, ReducedPrecisionLinear) and layer.precision == INT8
    x = torch.randn(3, 16)
    with torch.no_grad():
        before = layer(x)
        packed_first = layer._packed_for
        layer.weight.mul_(2.0)
        after = layer(x)
        expected = nn.functional.linear(x, layer.weight, layer.bias)
    assert packed_first is not None and layer._packed_for != packed_first  # packed, then repacked
    torch.testing.assert_close(after, expected, atol=0.05, rtol=0.05)
    assert not torch.equal(after, expected)  # the int8 products ran, not float32's
    assert not torch.allclose(before, after)


def test_bf16_runs_both_directions_in_lockstep_on_bf16_weight_copies(bf16_cpu):
    plain = random_bilm(seed=4, dim=64, projection_dim=32)
    reference = layers(plain).layers
    fast = optimize_for_inference(random_bilm(seed=4, dim=64, projection_dim=32), precision="bf16")
    pairs = list(zip(fast.forward_lstm.layers, fast.backward_lstm.layers))
    assert fast.runner.precision == BF16 and runs_in_lockstep(pairs, BF16)
    got = layers(fast).layers
    valid = reference.abs().sum(-1) > 0
    cos = nn.functional.cosine_similarity(got[valid], reference[valid], dim=-1)
    assert cos.min() > 0.999
    first = fast.forward_lstm.layers[0]
    key, copies, packed, onednn = first._bf16_paired
    assert all(w.dtype == torch.bfloat16 for w in copies)
    assert packed is None or all(w.dtype == torch.bfloat16 for w in packed)  # for bf16_rows: a few rows
    assert onednn is None or len(onednn) == 2  # per direction, for oneDNN: the batches' timesteps
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
    assert not runs_in_lockstep(pairs, BF16)


@pytest.mark.skipif(not prepacked.available(), reason="this torch has no oneDNN linear ops")
def test_bf16_batches_take_the_prepacked_copies_and_compute_what_bmm_does(bf16_cpu, monkeypatch):
    fast = optimize_for_inference(random_bilm(seed=4, dim=64, projection_dim=32), precision="bf16")
    rows = []
    original = prepacked.product
    monkeypatch.setattr(prepacked, "product", lambda x, *a, **k: rows.append(x.shape[0]) or original(x, *a, **k))
    monkeypatch.setattr(bf16_rows, "ROWS", 0)  # every timestep past the kernel of a few rows
    got = layers(fast).layers
    # every timestep's two products, both directions, both layers, on the packs (the first step: every row)
    assert rows and len(rows) % 8 == 0 and max(rows) == len(SENTENCES) > 1
    monkeypatch.setattr(lockstep, "bf16_onednn_weights", lambda pair, paired: None)  # bmm on the same copies
    on_bmm = layers(fast).layers
    torch.testing.assert_close(got, on_bmm, atol=2e-2, rtol=2e-2)  # the same bf16 products, summed alike or nearly


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


def _highway_outliers(seed: int):
    """A biLM whose highway output has two channels near 40 while the rest stay below a few units,
    and whose projection reads those two lightly: the range of the projection's input is set by a
    few large values, as in trained models (0 to 49, median 0.29, on the shipped en_small 0.6.0)."""
    bilm = random_bilm(seed=seed, dim=64, projection_dim=32)
    with torch.no_grad():
        highway = bilm.token_encoder.highway
        highway.transform[0].bias[:2] += 40.0
        highway.carry[0].bias[:2] += 10.0  # gate open: the transform's output passes
        bilm.token_encoder.projection.weight[:, :2] *= 0.01
    return bilm


@pytest.mark.parametrize("seed", [1, 3])
def test_int8_keeps_the_token_projection_in_fp32_and_stays_close_with_outlier_inputs(seed):
    reference = layers(_highway_outliers(seed)).layers
    fast = optimize_for_inference(_highway_outliers(seed), precision="int8")
    assert type(fast.token_encoder.projection) is nn.Linear
    assert fast.token_encoder.highway.transform[0].precision == INT8
    assert all(layer.precision == INT8 for lstm in (fast.forward_lstm, fast.backward_lstm) for pair in lstm.layers
               for layer in (pair.input_linearity, pair.state_linearity, pair.projection))
    valid = reference.abs().sum(-1) > 0
    got = layers(fast).layers
    cos = nn.functional.cosine_similarity(got[valid], reference[valid], dim=-1)
    assert cos.mean() > 0.999 and cos.min() > 0.999  # every linear layer int8 here: about 0.995, lowest 0.97
    # asked for again, and after fp32, the projection stays (or becomes) float32 again
    reduce_precision(fast, "int8")
    assert isinstance(fast.token_encoder.projection, ReducedPrecisionLinear)
    optimize_for_inference(fast, precision="int8")
    assert type(fast.token_encoder.projection) is nn.Linear
    assert reduce_precision(fast, "int8", keep=("token_encoder.projection",)) == 0


def test_int8_inputs_take_8_bits_only_where_the_kernels_do_not_saturate(monkeypatch):
    """Without the compiled library int8 runs torch's products: u8 * s8 pairs summed in int16 (fbgemm
    and oneDNN without VNNI) saturate on 8-bit inputs; ``int8_full_range`` runs the kernels to find
    out, and the layers quantize their inputs to match."""
    monkeypatch.setattr(int8_rows, "rows_op", lambda: None)
    full = quantize.int8_full_range()
    holder = nn.Sequential(nn.Linear(64, 8, bias=False)).eval()
    with torch.no_grad():
        holder[0].weight.fill_(1.0)
    reduce_precision(holder, "int8")
    layer = holder[0]
    x = torch.ones(3, 64)  # 255 against 127 at 8 bits: pairs of 64770 overflow int16
    with torch.no_grad():
        y = layer(x)
    torch.testing.assert_close(y, torch.full_like(y, 64.0), atol=0.5, rtol=0)
    assert layer._current()[1] is (not full)
    # the decision follows the engine: another one is probed and the weights are packed for it
    engine = torch.backends.quantized.engine
    other = next((e for e in ("onednn", "fbgemm", "x86") if e != engine and e in torch.backends.quantized.supported_engines), None)
    if other is not None:
        try:
            torch.backends.quantized.engine = other
            with torch.no_grad():
                y = layer(x)
            assert layer._packed_for[-1] == other and layer._current()[1] is (not quantize.int8_full_range(other))
            torch.testing.assert_close(y, torch.full_like(y, 64.0), atol=0.5, rtol=0)
        finally:
            torch.backends.quantized.engine = engine
    # fbgemm's AVX512-VNNI kernels accumulate in int32: all 8 bits there (unless told to run others)
    flags = quantize._kernel_cpu_flags() or []
    if engine in ("x86", "fbgemm") and "avx512_vnni" in flags and not os.environ.get("FBGEMM_ENABLE_INSTRUCTIONS"):
        assert full


def test_int8_full_range_is_decided_by_the_probe(monkeypatch):
    monkeypatch.setattr(quantize, "_FULL_RANGE", {})
    calls = []
    monkeypatch.setattr(quantize, "_probe_full_range", lambda engine: calls.append(engine) or engine == "onednn")
    assert quantize.int8_full_range("onednn") and not quantize.int8_full_range("x86")
    assert quantize.int8_full_range("onednn") and calls == ["onednn", "x86"]  # once per engine


def test_an_engine_failing_the_saturation_probe_says_so_once_and_keeps_7_bits(monkeypatch):
    monkeypatch.setattr(quantize, "_FULL_RANGE", {})

    def fails(weight, bias):
        raise RuntimeError("no kernel for this engine")

    monkeypatch.setattr(quantize, "_pack_int8", fails)
    engine = torch.backends.quantized.engine
    with pytest.warns(RuntimeWarning, match=f"engine '{engine}' failed the check.*no kernel for this engine.*7 bits"):
        assert quantize.int8_full_range() is False
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert quantize.int8_full_range() is False  # decided once per engine: said once


def test_the_users_word_is_read_once_into_a_precision_that_the_plan_and_the_runner_hold():
    assert [quantize.choose_precision(word) for word in quantize.PRECISIONS] == [FP32, BF16, FP16, INT8]
    assert quantize.choose_precision(INT8) is INT8  # a Precision is given back as it is
    with pytest.raises(ValueError, match=r"precision must be one of \('fp32', 'bf16', 'fp16', 'int8'\), not 'float16'"):
        quantize.choose_precision("float16")
    plan = InferencePlan(optimize=True, precision="int8")
    bilm = random_bilm(seed=6)
    adopt(bilm, plan)
    prepare_pass(bilm, plan, is_train=False, trains_weights=False, need_version=False)
    assert plan.precision is INT8 and bilm.runner.precision == INT8 and plan.settings()["precision"] == "int8"
    assert bilm.forward_lstm.layers[0].state_linearity.precision == INT8
    assert INT8.float32_layers == quantize.INT8_FP32_LAYERS and not FP32.reduced and INT8.cpu_only


def test_whether_a_precision_pays_and_where_it_runs_are_the_precisions_to_say(monkeypatch):
    monkeypatch.setattr(quantize, "cpu_has_bf16", lambda: False)
    cpu, gpu = torch.device("cpu"), torch.device("cuda")
    assert not BF16.pays_on(cpu) and BF16.pays_on(gpu) and INT8.pays_on(cpu) and FP32.pays_on(cpu)
    monkeypatch.setattr(quantize, "cpu_has_bf16", lambda: True)
    assert BF16.pays_on(cpu)
    with pytest.raises(ValueError, match='precision "int8" runs on CPU only'):
        INT8.check_device(gpu)
    FP16.check_device(cpu)
    BF16.check_device(gpu)
