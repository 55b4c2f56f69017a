"""The in-place inference loop: bitwise the reference loop; its fused variant within 1e-6."""
import torch

from spacy_elmo.bilm.lstm import LSTMPLayer, cell_step
from spacy_elmo.fast.dispatch import Runner
from spacy_elmo.fast.in_place import InPlaceStep, cell_step_in_place


# what an attached runner hands each layer (the directions one after the other)
RUN = Runner(exact=True).run_layer


def test_in_place_loop_is_bitwise_the_reference_loop():
    torch.manual_seed(0)
    layer = LSTMPLayer(6, 12, 5, cell_clip=0.5, proj_clip=0.4)
    inputs = torch.randn(4, 7, 6) * 3
    batch_sizes = [4, 4, 3, 3, 2, 1, 0]
    state = (torch.randn(4, 5), torch.randn(4, 12))
    with torch.no_grad():
        fast_out, (fast_h, fast_c) = layer(inputs, batch_sizes, state, RUN)
    slow_out, (slow_h, slow_c) = layer(inputs.requires_grad_(), batch_sizes, state, RUN)
    with torch.no_grad():
        ref_out, (ref_h, ref_c) = layer(inputs, batch_sizes, state)
    assert torch.equal(fast_out, ref_out) and torch.equal(fast_h, ref_h) and torch.equal(fast_c, ref_c)
    torch.testing.assert_close(fast_out, slow_out.detach(), atol=1e-6, rtol=0)
    torch.testing.assert_close(fast_h, slow_h.detach(), atol=1e-6, rtol=0)
    torch.testing.assert_close(fast_c, slow_c.detach(), atol=1e-6, rtol=0)
    assert fast_out[1, 6].abs().max() == 0 and fast_out[0, 6].abs().max() == 0  # zero past each row's end
    # the caller's state is not modified in place
    assert state[1].requires_grad is False and not torch.equal(state[1], fast_c)


def _in_place_buffers(gates: torch.Tensor, cell: torch.Tensor) -> InPlaceStep:
    dim = cell.shape[-1]
    parts = [gates[..., k * dim : (k + 1) * dim] for k in range(4)]
    return InPlaceStep(*parts, torch.empty_like(cell), gates.new_tensor(2.0), gates.new_tensor(1.0))


def test_cell_step_in_place_is_bitwise_the_reference_step():
    torch.manual_seed(1)
    gates, cell = torch.randn(2, 3, 4 * 16) * 4, torch.randn(2, 3, 16) * 2
    for clip in (None, 0.7):
        hidden, new_cell = cell_step(gates, cell, 16, clip)
        in_gates, in_cell = gates.clone(), cell.clone()
        buffers = _in_place_buffers(in_gates, in_cell)
        got_hidden, got_cell = cell_step_in_place(in_gates, in_cell, 16, clip, buffers, fused=False)
        assert torch.equal(got_hidden, hidden) and torch.equal(got_cell, new_cell)
        assert got_cell.data_ptr() == in_cell.data_ptr()  # written where the caller's cell lives
        assert got_hidden.data_ptr() == buffers.product.data_ptr()
        if clip is not None:
            assert new_cell.abs().max() <= clip and not torch.equal(new_cell, cell_step(gates, cell, 16, None)[1])


def test_fused_cell_step_close_to_the_reference_step():
    torch.manual_seed(2)
    gates, cell = torch.randn(1, 5, 4 * 32) * 4, torch.randn(1, 5, 32)
    gates[0, 0, 32:64] = torch.linspace(-20, 20, 32)  # tanh's inputs over its whole range
    hidden, new_cell = cell_step(gates, cell, 32, 3.0)
    in_gates, in_cell = gates.clone(), cell.clone()
    buffers = _in_place_buffers(in_gates, in_cell)
    got_hidden, got_cell = cell_step_in_place(in_gates, in_cell, 32, 3.0, buffers, fused=True)
    torch.testing.assert_close(got_hidden, hidden, atol=1e-6, rtol=0)
    torch.testing.assert_close(got_cell, new_cell, atol=1e-6, rtol=0)


def test_the_fused_loops_cells_in_the_kernel_library_match_torch_operations():
    from spacy_elmo.fast import in_place

    torch.manual_seed(3)
    layers = [LSTMPLayer(8, 32, 6, cell_clip=0.6, proj_clip=0.5) for _ in range(2)]
    batch_sizes = [4, 4, 3, 2, 2, 1]
    projected = torch.randn(2, sum(batch_sizes), 4 * 32) * 2
    states = [(torch.randn(4, 6), torch.randn(4, 32)) for _ in layers]
    paired = (torch.stack([layer.state_linearity.weight.t() for layer in layers]),
              torch.stack([layer.projection.weight.t() for layer in layers]))
    if in_place.cell_kernels(projected) is None:
        import pytest

        pytest.skip("no kernel library here: the fused loop's cells run in torch operations")
    with torch.no_grad():
        got, got_finals = in_place.run_in_place(layers, projected, batch_sizes, states, paired, packed=True, fused=True)
        with in_place.torch_cells():
            assert in_place.cell_kernels(projected) is None
            want, want_finals = in_place.run_in_place(layers, projected, batch_sizes, states, paired, packed=True, fused=True)
        exact, _ = in_place.run_in_place(layers, projected, batch_sizes, states, paired, packed=True, fused=False)
    torch.testing.assert_close(got, want, atol=2e-6, rtol=0)
    torch.testing.assert_close(got, exact, atol=2e-6, rtol=0)
    for (h, c), (wh, wc) in zip(got_finals, want_finals):
        torch.testing.assert_close(h, wh, atol=2e-6, rtol=0)
        torch.testing.assert_close(c, wc, atol=2e-6, rtol=0)
    assert got[5, :, 1:].abs().max() == 0  # zero past each row's end
    # the kernels ran: their tanh is not torch's 2 * sigmoid(2x) - 1, so the last bits differ
    assert not torch.equal(got, want)
