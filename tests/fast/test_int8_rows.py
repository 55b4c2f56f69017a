"""The int8 kernel: each row quantized on its own, the torch definition's results bit for bit, close to
float32, and a sentence's int8 vectors the same alone as in a batch."""
import pytest
import torch
from torch import nn

from spacy_elmo.fast import dispatch, int8_rows, kernel_library, optimize_for_inference

from ..bilm.sentences import SENTENCES, layers
from ..conftest import random_bilm

pytestmark = pytest.mark.skipif(kernel_library.compiler() is None, reason="no C++ compiler here")


@pytest.fixture
def kernel():
    if int8_rows.rows_op() is None:
        pytest.fail(f"the compiled library did not build: {kernel_library.status()}")


# the last shape has rows enough to split their quantization between threads
@pytest.mark.parametrize("shape", [(2, 1, 512, 256), (2, 3, 7, 70), (1, 5, 130, 64), (2, 9, 33, 129), (2, 16, 1024, 70)])
def test_the_kernel_computes_the_definition_bit_for_bit_and_stays_close_to_fp32(kernel, shape):
    n_dir, rows, width, out_features = shape
    torch.manual_seed(0)
    weights = torch.randn(n_dir, out_features, width) * 0.035
    x, add, bias = torch.randn(n_dir, rows, width), torch.randn(n_dir, rows, out_features), torch.randn(n_dir, out_features)
    x[0, 0, 0] = 40.0  # a row whose range is set by one large value: only that row's resolution drops
    packed = int8_rows.pack(weights.transpose(1, 2).contiguous().transpose(1, 2))  # strides do not matter
    assert torch.equal(packed.packed, int8_rows.pack(weights).packed)
    got = int8_rows.product(x, packed, torch.empty(n_dir, rows, out_features), bias=bias, add=add)
    assert torch.equal(got, int8_rows.reference(x, packed, bias=bias, add=add))
    exact = torch.bmm(x.double(), weights.double().transpose(1, 2))
    error = ((got - add - bias[:, None]).double() - exact).abs()
    # rounding each input by at most half its row's step s_x and each weight by half its output's
    # step s_w bounds the error of a sum: s_x / 2 sum |w| + s_w / 2 sum |x| + n s_x s_w / 4
    s_x = x.abs().amax(-1, keepdim=True).double() / 127
    s_w = packed.scales.double()[:, None, :]
    bound = (s_x / 2 * weights.abs().double().sum(-1)[:, None, :] + s_w / 2 * x.abs().double().sum(-1, keepdim=True)
             + width * s_x * s_w / 4)
    assert (error <= bound * 1.001 + 1e-5).all()
    # rows of a larger buffer, without add or bias
    buffer = torch.full((n_dir, rows + 2, out_features), 7.0)
    int8_rows.product(x, packed, buffer[:, :rows])
    assert torch.equal(buffer[:, :rows], int8_rows.reference(x, packed))
    assert torch.equal(buffer[:, rows:], torch.full_like(buffer[:, rows:], 7.0))


def test_a_rows_result_does_not_depend_on_the_other_rows(kernel):
    torch.manual_seed(1)
    packed = int8_rows.pack(torch.randn(1, 200, 96))
    x = torch.randn(1, 11, 96)
    x[0, 5] *= 1000.0  # a row with a far wider range than the others
    together = int8_rows.product(x, packed, torch.empty(1, 11, 200))
    for r in range(11):
        alone = int8_rows.product(x[:, r : r + 1].clone(), packed, torch.empty(1, 1, 200))
        assert torch.equal(alone[0, 0], together[0, r])


def test_packing_puts_every_weight_where_the_kernel_reads_it(kernel):
    weights = torch.zeros(1, 70, 5)
    weights[0, 66, 3] = 1.5  # an input of the second group, an output of the second (padded) block
    weights[0, 2, 0] = -0.5
    packed = int8_rows.pack(weights)
    assert packed.packed.shape == (1, 2, 2, 256) and packed.packed.dtype == torch.int8
    assert torch.equal(int8_rows.unpack(packed), torch.round(weights / packed.scales[:, :, None]).to(torch.int8))
    x = torch.zeros(1, 1, 5)
    x[0, 0, 3], x[0, 0, 0] = 2.0, -2.0  # 127 steps of its row: exact in 8 bits
    y = int8_rows.product(x, packed, torch.empty(1, 1, 70))
    expected = torch.zeros(1, 1, 70)
    expected[0, 0, 66], expected[0, 0, 2] = 3.0, 1.0
    torch.testing.assert_close(y, expected, atol=1e-6, rtol=0)


def test_the_op_refuses_weights_of_another_width(kernel):
    packed = int8_rows.pack(torch.randn(2, 64, 8))
    with pytest.raises(RuntimeError, match="widths do not match"):
        int8_rows.product(torch.randn(2, 1, 13), packed, torch.empty(2, 1, 64))


def test_int8_takes_the_kernel_and_gives_a_sentence_the_same_vectors_alone_and_in_a_batch(kernel, monkeypatch):
    reference = layers(random_bilm(seed=3, dim=64, projection_dim=32)).layers
    fast = optimize_for_inference(random_bilm(seed=3, dim=64, projection_dim=32), precision="int8")
    calls = []
    original = int8_rows.product
    monkeypatch.setattr(int8_rows, "product", lambda *a, **k: calls.append(a[0].shape[1]) or original(*a, **k))
    batch = layers(fast).layers
    assert calls and max(calls) > 1
    for row, sentence in enumerate(SENTENCES):
        n = len(sentence)
        if n == 0:
            continue
        calls.clear()
        alone = layers(fast, [sentence]).layers[:, 0, :n]
        assert 1 in calls  # the timesteps of one sentence: one-row products on the kernel
        # per-row ranges: the same within float32 rounding of the float parts (torch's per-tensor
        # ranges moved these vectors by about 1e-3 with the batch)
        torch.testing.assert_close(alone, batch[:, row, :n], atol=1e-5, rtol=0)
        valid = reference[:, row, :n].abs().sum(-1) > 0
        cos = nn.functional.cosine_similarity(alone[valid], reference[:, row, :n][valid], dim=-1)
        assert cos.min() > 0.999  # the precision's stated tolerance (test_precision.py)


def test_the_pair_in_lockstep_computes_what_each_directions_int8_layers_compute(kernel, monkeypatch):
    fast = optimize_for_inference(random_bilm(seed=4, dim=64, projection_dim=32), precision="int8")
    paths = []
    chosen = dispatch.Runner.stack_path
    monkeypatch.setattr(dispatch.Runner, "stack_path", lambda self, *a: paths.append(chosen(self, *a)) or paths[-1])
    in_lockstep = layers(fast).layers
    assert paths == ["lockstep_int8"]  # both directions' products in one call each
    monkeypatch.setattr(dispatch, "runs_in_lockstep", lambda pairs, precision: False)  # one direction after the other
    assert torch.equal(layers(fast).layers, in_lockstep) and paths[-1] is None
