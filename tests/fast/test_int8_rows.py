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


@pytest.mark.parametrize("shape", [(2, 1, 32, 16), (2, 5, 70, 48), (1, 9, 128, 32), (2, 64, 96, 64)])
@pytest.mark.parametrize("cell_clip", [3.0, None])
def test_the_step_in_one_call_equals_the_product_then_the_cells_bit_for_bit(kernel, shape, cell_clip):
    n_dir, rows, width, dim = shape
    torch.manual_seed(5)
    weights = torch.randn(n_dir, 4 * dim, width) * 0.1
    bias = torch.randn(n_dir, 4 * dim)
    x, add = torch.randn(n_dir, rows, width), torch.randn(n_dir, rows + 3, 4 * dim)[:, :rows]  # rows of a larger buffer
    cell = torch.randn(n_dir, rows + 2, dim) * 2  # rows past n stay as they are
    ops = kernel_library.library()
    gates = int8_rows.product(x, int8_rows.pack(weights), torch.empty(n_dir, rows, 4 * dim), bias=bias, add=add)
    expected_cell, expected_hidden = cell.clone(), torch.empty(n_dir, rows, dim)
    ops.lstm_cells(gates, expected_cell, expected_hidden, cell_clip)
    packed, unit_bias = int8_rows.pack_cells(weights, bias)
    assert packed.by_unit
    hidden = torch.full((n_dir, rows, dim), 7.0)
    int8_rows.cells(x, packed, unit_bias, add, cell, hidden, cell_clip)
    assert torch.equal(hidden, expected_hidden)
    assert torch.equal(cell, expected_cell)


def test_packing_by_unit_puts_each_units_four_gates_in_its_block(kernel):
    dim = 32
    order = int8_rows.unit_order(dim)
    assert sorted(order.tolist()) == list(range(4 * dim))
    assert order[:4].tolist() == [0, 1, 2, 3] and order[16:18].tolist() == [dim, dim + 1]  # gate j of unit 0 next
    assert order[64].item() == 16  # the second block starts at unit 16
    weights = torch.randn(2, 4 * dim, 40)
    packed, bias = int8_rows.pack_cells(weights, torch.arange(4 * dim).float().expand(2, -1))
    assert torch.equal(int8_rows.unpack(packed), int8_rows.unpack(int8_rows.pack(weights))[:, order])
    assert torch.equal(bias[0], order.float())
    with pytest.raises(ValueError, match="multiple of 16"):
        int8_rows.unit_order(40)


def test_the_step_in_one_call_refuses_shapes_it_cannot_run(kernel):
    packed, bias = int8_rows.pack_cells(torch.randn(1, 64, 8), None)
    x, add, cell, hidden = torch.randn(1, 2, 8), torch.randn(1, 2, 64), torch.zeros(1, 2, 16), torch.zeros(1, 2, 16)
    int8_rows.cells(x, packed, bias, add, cell, hidden, None)  # the shapes it takes
    with pytest.raises(RuntimeError, match="16 units a block"):
        int8_rows.cells(x, packed, bias, torch.randn(1, 2, 60), cell, hidden, None)
    with pytest.raises(RuntimeError, match="cell"):
        int8_rows.cells(x, packed, bias, add, torch.zeros(1, 1, 16), hidden, None)  # fewer cells than rows
    with pytest.raises(RuntimeError, match="contiguous rows"):
        int8_rows.cells(torch.randn(1, 8, 2).transpose(1, 2), packed, bias, add, cell, hidden, None)


def test_the_int8_loop_takes_the_step_in_one_call_and_computes_what_product_and_cells_do(kernel, monkeypatch):
    from spacy_elmo.fast import lockstep

    bilm = random_bilm(seed=6, dim=64, projection_dim=32)
    fast = optimize_for_inference(bilm, precision="int8")
    calls = []
    original = int8_rows.cells
    monkeypatch.setattr(int8_rows, "cells", lambda *a, **k: calls.append(a[0].shape[1]) or original(*a, **k))
    one_call = layers(fast).layers
    assert calls and max(calls) > 1
    for layer in list(fast.forward_lstm.layers) + list(fast.backward_lstm.layers):
        lockstep.forget_bf16_weights(layer)
    monkeypatch.setattr(lockstep, "_by_unit", lambda layer, weights: False)  # the gates written, then the cells
    calls.clear()
    assert torch.equal(layers(fast).layers, one_call) and not calls


def test_cells_in_torch_over_weights_packed_by_unit_put_the_sums_back_in_gate_order(kernel, monkeypatch):
    """``in_place.torch_cells`` over the by-unit packing: the same int8 sums, put back in gate order for
    the cells in torch operations, give what the fused step gives to the cells' rounding."""
    from spacy_elmo.fast import in_place, lockstep

    bilm = random_bilm(seed=7, dim=64, projection_dim=32)
    fast = optimize_for_inference(bilm, precision="int8")
    fused = layers(fast).layers
    calls = []
    original = int8_rows.cells
    monkeypatch.setattr(int8_rows, "cells", lambda *a, **k: calls.append(1) or original(*a, **k))
    with in_place.torch_cells():
        in_torch = layers(fast).layers
    assert not calls  # the cells ran in torch operations
    assert lockstep.int8_weights((fast.forward_lstm.layers[0], fast.backward_lstm.layers[0]))[1][0].by_unit
    assert (in_torch - fused).abs().max() < 1e-5
    # put back in the wrong order, the gates would give other vectors entirely
    monkeypatch.setattr(int8_rows, "unit_order", lambda dim: torch.arange(4 * dim))
    with in_place.torch_cells():
        scrambled = layers(fast).layers
    assert (scrambled - fused).abs().max() > 1e-2
