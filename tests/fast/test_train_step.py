"""The training step's one-node LSTMP (fast/train_step.py) against the reference loop under autograd."""
import copy

import pytest
import torch

from spacy_elmo.fast import dispatch
from spacy_elmo.fast import train_step as lstm_grad
from spacy_elmo.bilm.lstm import LSTMPLayer


# what an attached runner hands each layer (the directions one after the other)
RUN = dispatch.Runner(exact=True).run_layer


def _layer(dtype, cell_clip=3.0, proj_clip=3.0, scale=1.0):
    torch.manual_seed(0)
    layer = LSTMPLayer(6, 8, 5, cell_clip, proj_clip).to(dtype)
    with torch.no_grad():
        for p in layer.parameters():
            p.mul_(scale)
    return layer


def _run(layer, inputs, sizes, state, reference):
    """Outputs, final state and every gradient of a random objective over all three."""
    inputs = inputs.clone().requires_grad_()
    h0, c0 = (s.clone().requires_grad_() for s in state)
    layer.zero_grad()
    if reference:
        with dispatch.op_by_op():
            out, (h, c) = layer(inputs, sizes, (h0, c0), RUN)
    else:
        out, (h, c) = layer(inputs, sizes, (h0, c0), RUN)
    gen = torch.Generator().manual_seed(1)
    weights = [torch.randn(x.shape, generator=gen).to(x.dtype) for x in (out, h, c)]
    (sum((w * x).sum() for w, x in zip(weights, (out, h, c)))).backward()
    grads = [inputs.grad, h0.grad, c0.grad] + [p.grad for p in layer.parameters()]
    return [out.detach(), h.detach(), c.detach()], grads


# uneven lengths (rows end at different steps), a row that never runs, all rows full length
SIZES = [[4, 4, 3, 3, 1, 1, 1], [3, 3, 3], [5, 2, 2, 1]]


@pytest.mark.parametrize("sizes", SIZES)
@pytest.mark.parametrize("clips,scale", [((3.0, 3.0), 1.0), ((0.5, 0.2), 4.0), ((None, None), 1.0)])
def test_outputs_and_gradients_match_the_op_by_op_loop(sizes, clips, scale):
    layer = _layer(torch.float64, *clips, scale=scale)
    batch = sizes[0] + 1  # one row of length 0
    torch.manual_seed(2)
    inputs = torch.randn(batch, len(sizes), 6, dtype=torch.float64) * scale
    state = (torch.randn(batch, 5, dtype=torch.float64), torch.randn(batch, 8, dtype=torch.float64))
    got_values, got_grads = _run(layer, inputs, sizes, state, reference=False)
    want_values, want_grads = _run(layer, inputs, sizes, state, reference=True)
    for got, want in zip(got_values, want_values):
        assert torch.equal(got, want)  # the same arithmetic, in the same order
    for got, want in zip(got_grads, want_grads):
        torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-12)
    if clips[0] == 0.5:  # the clips were active, so their masks were exercised
        assert (want_values[2].abs() == 0.5).any()


def test_float32_gradients_close_to_the_op_by_op_loop():
    layer = _layer(torch.float32)
    inputs = torch.randn(4, 7, 6)
    state = (torch.zeros(5, 5)[:4], torch.zeros(4, 8))
    sizes = SIZES[0]
    got_values, got_grads = _run(layer, inputs, sizes, state, reference=False)
    want_values, want_grads = _run(layer, inputs, sizes, state, reference=True)
    for got, want in zip(got_values + got_grads, want_values + want_grads):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


def test_gradcheck():
    layer = _layer(torch.float64, 0.8, 0.6, scale=2.0)
    sizes = (3, 2, 2, 1)
    torch.manual_seed(3)
    projected = torch.randn(4, 3, 32, dtype=torch.float64, requires_grad=True)
    h0 = torch.randn(3, 5, dtype=torch.float64, requires_grad=True)
    c0 = torch.randn(3, 8, dtype=torch.float64, requires_grad=True)
    w_state = layer.state_linearity.weight.detach().clone().requires_grad_()
    w_proj = layer.projection.weight.detach().clone().requires_grad_()

    def run(p, h, c, ws, wp):
        out, (hf, cf) = lstm_grad.run_steps(p, (h, c), (ws, wp), sizes, 8, (0.8, 0.6))
        return out, hf, cf

    assert torch.autograd.gradcheck(run, (projected, h0, c0, w_state, w_proj))


def test_the_training_path_uses_it_and_float16_autocast_does_not(monkeypatch):
    calls = []
    original = lstm_grad.LSTMPSteps.apply
    monkeypatch.setattr(lstm_grad.LSTMPSteps, "apply", lambda *a: calls.append(1) or original(*a))
    layer = _layer(torch.float32)
    inputs = torch.randn(2, 3, 6, requires_grad=True)
    state = (torch.zeros(2, 5), torch.zeros(2, 8))
    layer(inputs, [2, 2, 1], state, RUN)[0].sum().backward()
    assert calls == [1]
    with torch.autocast("cpu", dtype=torch.bfloat16):  # the node, with its products in bfloat16
        out, _ = layer(inputs, [2, 2, 1], state, RUN)
    assert calls == [1, 1] and out.dtype == torch.float32
    with torch.autocast("cpu", dtype=torch.float16):  # autocast to float16: the reference loop
        out, _ = layer(inputs, [2, 2, 1], state, RUN)
    assert calls == [1, 1] and out.dtype == torch.float16
    with torch.no_grad():  # inference keeps its own in-place loop
        layer(inputs, [2, 2, 1], state, RUN)
    assert calls == [1, 1]
    layer(inputs, [2, 2, 1], state)[0].sum().backward()  # no runner: the reference loop
    assert calls == [1, 1]


def _bf16_errors(layer32, inputs, sizes, state, ops):
    """Largest error, relative to each tensor's largest value, of the outputs and gradients under
    bfloat16 autocast against the float64 reference."""
    layer64 = copy.deepcopy(layer32).double()
    want_values, want_grads = _run(layer64, inputs.double(), sizes, tuple(s.double() for s in state), reference=True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got_values, got_grads = _run(layer32, inputs, sizes, state, reference=ops)
    return [float((g.double() - w).abs().max() / w.abs().max()) for g, w in zip(got_values + got_grads, want_values + want_grads)]


@pytest.mark.parametrize("sizes", SIZES)
def test_bfloat16_products_are_as_close_as_autocasts_own_loop(sizes):
    # a layer of real widths (the products' rounding shows), uneven lengths, active clips
    torch.manual_seed(4)
    layer = LSTMPLayer(64, 128, 32, 3.0, 3.0)
    batch = sizes[0] + 1
    inputs = torch.randn(batch, len(sizes), 64)
    state = (torch.randn(batch, 32) * 0.5, torch.randn(batch, 128) * 0.5)
    node = _bf16_errors(layer, inputs, sizes, state, ops=False)
    ops = _bf16_errors(layer, inputs, sizes, state, ops=True)
    assert max(node) < 0.05
    assert max(node) > 1e-4  # the products did run in bfloat16 (float32 would be ~1e-6)
    # no worse than autocast's op-by-op loop, which also rounds sums and activations to bfloat16
    assert max(node) <= 1.5 * max(ops)


def test_bfloat16_rows_past_their_end_are_zero_with_their_gradients():
    layer = _layer(torch.float32)
    sizes = SIZES[0]
    inputs = torch.randn(sizes[0] + 1, len(sizes), 6, requires_grad=True)
    state = (torch.randn(sizes[0] + 1, 5), torch.randn(sizes[0] + 1, 8))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out, _ = layer(inputs, sizes, state, RUN)
    out.sum().backward()
    lengths = [sum(1 for n in sizes if n > row) for row in range(sizes[0] + 1)]
    for row, length in enumerate(lengths):
        assert torch.all(out[row, length:] == 0) and torch.all(out[row, :length] != 0)
        assert torch.all(inputs.grad[row, length:] == 0)
    assert torch.isfinite(inputs.grad).all() and all(torch.isfinite(p.grad).all() for p in layer.parameters())


def test_second_derivatives_raise_unless_op_by_op():
    layer = _layer(torch.float64)
    inputs = torch.randn(2, 3, 6, dtype=torch.float64, requires_grad=True)
    state = (torch.zeros(2, 5, dtype=torch.float64), torch.zeros(2, 8, dtype=torch.float64))
    out, _ = layer(inputs, [2, 2, 1], state, RUN)
    (grad,) = torch.autograd.grad(out.pow(2).sum(), inputs, create_graph=True)
    with pytest.raises(RuntimeError):
        grad.sum().backward()
    with dispatch.op_by_op():
        out, _ = layer(inputs, [2, 2, 1], state, RUN)
        (grad,) = torch.autograd.grad(out.pow(2).sum(), inputs, create_graph=True)
        grad.sum().backward()
    assert inputs.grad is not None and torch.isfinite(inputs.grad).all()


def _cells_or_skip():
    if lstm_grad.cell_kernels("cpu", torch.float32) is None:
        pytest.skip("no kernel library here: the node's elementwise work runs in torch operations")


@pytest.mark.parametrize("sizes", SIZES)
@pytest.mark.parametrize("clips,scale", [((3.0, 3.0), 1.0), ((0.5, 0.2), 4.0), ((None, None), 1.0)])
def test_the_kernel_librarys_cells_agree_with_torch_operations(sizes, clips, scale):
    # float32 at real widths: the kernels' loop against the same node with its cells in torch
    _cells_or_skip()
    torch.manual_seed(5)
    layer = LSTMPLayer(48, 64, 24, *clips)
    with torch.no_grad():
        for p in layer.parameters():
            p.mul_(scale)
    batch = sizes[0] + 1
    inputs = torch.randn(batch, len(sizes), 48) * scale
    state = (torch.randn(batch, 24), torch.randn(batch, 64))
    ops = lstm_grad.cell_kernels("cpu", torch.float32)
    got_values, got_grads = _run(layer, inputs, sizes, state, reference=False)
    with lstm_grad.torch_cells():
        assert lstm_grad.cell_kernels("cpu", torch.float32) is None
        want_values, want_grads = _run(layer, inputs, sizes, state, reference=False)
    for got, want in zip(got_values + got_grads, want_values + want_grads):
        torch.testing.assert_close(got, want, rtol=2e-5, atol=2e-6)
    if clips[0] == 0.5:
        assert (want_values[2].abs() == 0.5).any() and (got_values[2].abs() == 0.5).any()
    # rows past their end stay zero, and the float64 node (exact comparisons) does not take the kernels
    assert lstm_grad.cell_kernels("cpu", torch.float64) is None and ops is not None


def test_the_kernel_librarys_cells_round_the_hidden_state_to_bfloat16_as_torch_does():
    _cells_or_skip()
    torch.manual_seed(6)
    layer = LSTMPLayer(64, 128, 32, 3.0, 3.0)
    sizes = SIZES[0]
    batch = sizes[0] + 1
    inputs = torch.randn(batch, len(sizes), 64)
    state = (torch.randn(batch, 32) * 0.5, torch.randn(batch, 128) * 0.5)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got_values, got_grads = _run(layer, inputs, sizes, state, reference=False)
        with lstm_grad.torch_cells():
            want_values, want_grads = _run(layer, inputs, sizes, state, reference=False)
    for got, want in zip(got_values + got_grads, want_values + want_grads):
        # bfloat16 products: a last-bit difference in an operand moves a sum by bfloat16's step
        assert float((got - want).abs().max()) <= 0.02 * float(want.abs().max())
    errors = _bf16_errors(layer, inputs, sizes, state, ops=False)
    assert max(errors) < 0.05


def test_the_kernel_ops_refuse_rows_of_the_wrong_shape():
    _cells_or_skip()
    ops = lstm_grad.cell_kernels("cpu", torch.float32)
    gates, cell = torch.zeros(3, 16), torch.zeros(3, 4)
    with pytest.raises(RuntimeError, match="train_cells"):
        ops.train_cells(gates, None, None, cell, torch.zeros(3, 4), torch.zeros(3, 5), torch.zeros(3, 4), None)
    with pytest.raises(RuntimeError, match="train_cells"):
        ops.train_cells(gates, None, None, cell, torch.zeros(3, 4), torch.zeros(3, 4),
                        torch.zeros(3, 4, dtype=torch.float64), None)
    with pytest.raises(RuntimeError, match="train_cells"):  # a product comes with what it is added to
        ops.train_cells(gates, None, torch.zeros(3, 16, dtype=torch.bfloat16), cell, cell.clone(), cell.clone(),
                        cell.clone(), None)
    with pytest.raises(RuntimeError, match="train_cells"):  # and is not added into itself
        ops.train_cells(gates, gates, torch.zeros(3, 16, dtype=torch.bfloat16), cell, cell.clone(), cell.clone(),
                        cell.clone(), None)
    with pytest.raises(RuntimeError, match="train_cells"):
        ops.train_cells_backward(gates, cell, cell, cell, True, cell, torch.zeros(4, 3).t(), gates, 3.0)


def test_a_float32_products_input_projections_are_added_in_the_kernel_as_a_separate_add_would():
    """fp32: the recurrent product goes into the gates and the kernel adds the input projections as it
    reads them (``first`` without ``product``), as adding them first and passing the sums does."""
    _cells_or_skip()
    ops = lstm_grad.cell_kernels("cpu", torch.float32)
    torch.manual_seed(9)
    n, dim = 5, 24
    product, first, start = torch.randn(n, 4 * dim), torch.randn(n, 4 * dim), torch.randn(n, dim)
    outputs = []
    for gates, added in ((product.clone(), first), (product + first, None)):
        cell, raw, tanh_cell, hidden = start.clone(), torch.empty(n, dim), torch.empty(n, dim), torch.empty(n, dim)
        ops.train_cells(gates, added, None, cell, raw, tanh_cell, hidden, 3.0)
        outputs.append((gates, cell, raw, tanh_cell, hidden))
    for got, want in zip(*outputs):
        assert torch.equal(got, want)
    with pytest.raises(RuntimeError, match="first must not be gates"):
        ops.train_cells(product, product, None, start.clone(), torch.empty(n, dim), torch.empty(n, dim),
                        torch.empty(n, dim), 3.0)
