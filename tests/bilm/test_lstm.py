"""The LSTM step: the in-place inference path equals the autograd path; tanh through sigmoid."""
import torch

from spacy_elmo.bilm.lstm import InPlaceStep, LSTMPLayer, _tanh_via_sigmoid_, cell_step

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


def test_tanh_via_sigmoid_close_to_tanh():
    x = torch.linspace(-20, 20, 4001)
    torch.testing.assert_close(_tanh_via_sigmoid_(x.clone()), torch.tanh(x), atol=2.5e-7, rtol=0)
    big = torch.randn(2, 64, 4096) * 4
    torch.testing.assert_close(_tanh_via_sigmoid_(big.clone()), torch.tanh(big), atol=2.5e-7, rtol=0)


def _in_place_buffers(gates: torch.Tensor, cell: torch.Tensor) -> InPlaceStep:
    dim = cell.shape[-1]
    parts = [gates[..., k * dim : (k + 1) * dim] for k in range(4)]
    return InPlaceStep(*parts, torch.empty_like(cell), gates.new_tensor(2.0), gates.new_tensor(1.0))


def test_cell_step_in_place_is_bitwise_the_autograd_step():
    torch.manual_seed(1)
    gates, cell = torch.randn(2, 3, 4 * 16) * 4, torch.randn(2, 3, 16) * 2
    for clip in (None, 0.7):
        hidden, new_cell = cell_step(gates, cell, 16, clip)
        in_gates, in_cell = gates.clone(), cell.clone()
        buffers = _in_place_buffers(in_gates, in_cell)
        got_hidden, got_cell = cell_step(in_gates, in_cell, 16, clip, tanh=torch.Tensor.tanh_, buffers=buffers)
        assert torch.equal(got_hidden, hidden) and torch.equal(got_cell, new_cell)
        assert got_cell.data_ptr() == in_cell.data_ptr()  # written where the caller's cell lives
        assert got_hidden.data_ptr() == buffers.product.data_ptr()
        if clip is not None:
            assert new_cell.abs().max() <= clip and not torch.equal(new_cell, cell_step(gates, cell, 16, None)[1])
    # the math itself, written out once more here: c' = f * c + i * j, h = o * tanh(c')
    i, j, f, o = gates.split(16, dim=-1)
    expected_cell = torch.sigmoid(f) * cell + torch.sigmoid(i) * torch.tanh(j)
    torch.testing.assert_close(cell_step(gates, cell, 16, None)[1], expected_cell)
    torch.testing.assert_close(cell_step(gates, cell, 16, None)[0], torch.sigmoid(o) * torch.tanh(expected_cell))


def test_fused_cell_step_close_to_the_plain_step():
    torch.manual_seed(2)
    gates, cell = torch.randn(1, 5, 4 * 32) * 4, torch.randn(1, 5, 32)
    hidden, new_cell = cell_step(gates, cell, 32, 3.0)
    in_gates, in_cell = gates.clone(), cell.clone()
    buffers = _in_place_buffers(in_gates, in_cell)
    got_hidden, got_cell = cell_step(in_gates, in_cell, 32, 3.0, tanh=_tanh_via_sigmoid_, buffers=buffers, fused=True)
    torch.testing.assert_close(got_hidden, hidden, atol=1e-6, rtol=0)
    torch.testing.assert_close(got_cell, new_cell, atol=1e-6, rtol=0)


def test_autograd_path_carries_running_rows_like_each_row_alone():
    """Rows end from the bottom up; each keeps its own final state, outputs and gradients, as if run alone."""
    torch.manual_seed(1)
    layer = LSTMPLayer(6, 12, 5, cell_clip=0.5, proj_clip=0.4)
    lengths = [6, 4, 4, 1, 0]
    batch_sizes = [sum(n > t for n in lengths) for t in range(6)]
    inputs = torch.randn(5, 6, 6, requires_grad=True)
    state = (torch.randn(5, 5, requires_grad=True), torch.randn(5, 12, requires_grad=True))
    out, (h, c) = layer(inputs, batch_sizes, state)
    weights = torch.randn_like(out)
    ((out * weights).sum() + h.pow(2).sum() + c.sum()).backward()
    for row, n in enumerate(lengths):
        x = inputs.detach()[row : row + 1].clone().requires_grad_()
        s = tuple(t.detach()[row : row + 1].clone().requires_grad_() for t in state)
        alone, (h1, c1) = layer(x[:, :n], [1] * n, s)
        ((alone * weights[row : row + 1, :n]).sum() + h1.pow(2).sum() + c1.sum()).backward()
        torch.testing.assert_close(out[row, :n], alone[0], atol=1e-6, rtol=0)
        assert not out[row, n:].any()  # zero past the row's end
        torch.testing.assert_close(h[row], h1[0], atol=1e-6, rtol=0)
        torch.testing.assert_close(c[row], c1[0], atol=1e-6, rtol=0)
        if n:
            torch.testing.assert_close(inputs.grad[row, :n], x.grad[0, :n], atol=1e-6, rtol=0)
        assert not inputs.grad[row, n:].any()
        torch.testing.assert_close(state[0].grad[row], s[0].grad[0], atol=1e-6, rtol=0)
        torch.testing.assert_close(state[1].grad[row], s[1].grad[0], atol=1e-6, rtol=0)
    # a row that never ran keeps its initial state, and passes its gradient straight through
    assert torch.equal(h[4], state[0][4]) and torch.equal(c[4], state[1][4])
