"""The reference LSTMP loop: its cell step's math, rows ending at their own lengths."""
import torch

from spacy_elmo.bilm.lstm import LSTMPLayer, cell_step


def test_cell_step_computes_the_lstm_cell():
    torch.manual_seed(1)
    gates, cell = torch.randn(2, 3, 4 * 16) * 4, torch.randn(2, 3, 16) * 2
    # the math written out once more here: c' = f * c + i * j, h = o * tanh(c'), the cell clipped
    i, j, f, o = gates.split(16, dim=-1)
    expected_cell = torch.sigmoid(f) * cell + torch.sigmoid(i) * torch.tanh(j)
    torch.testing.assert_close(cell_step(gates, cell, 16, None)[1], expected_cell)
    torch.testing.assert_close(cell_step(gates, cell, 16, None)[0], torch.sigmoid(o) * torch.tanh(expected_cell))
    clipped = cell_step(gates, cell, 16, 0.7)[1]
    assert clipped.abs().max() <= 0.7 and torch.equal(clipped, expected_cell.clamp(-0.7, 0.7))



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
