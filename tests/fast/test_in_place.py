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


def _bf16_pair(seed: int, rows: int):
    torch.manual_seed(seed)
    layers = [LSTMPLayer(8, 32, 6, cell_clip=0.6, proj_clip=0.5) for _ in range(2)]
    batch_sizes = [rows, rows, rows - 2, 5, 5, 3, 1]
    projected = torch.randn(2, sum(batch_sizes), 4 * 32) * 2
    states = [(torch.randn(rows, 6), torch.randn(rows, 32)) for _ in layers]
    paired = (torch.stack([layer.state_linearity.weight.t() for layer in layers]).bfloat16(),
              torch.stack([layer.projection.weight.t() for layer in layers]).bfloat16())
    return layers, batch_sizes, projected, states, paired


def test_bfloat16_timesteps_take_the_kernel_librarys_summed_cells_and_match_torch_operations(monkeypatch):
    from spacy_elmo.fast import in_place, prepacked

    layers, batch_sizes, projected, states, paired = _bf16_pair(4, 9)
    if in_place._low_cells(paired, projected, None, None, 1) is None:
        import pytest

        pytest.skip("no kernel library here: bfloat16 timesteps run op by op")
    steps = []
    real_step = in_place.LowCells.step
    monkeypatch.setattr(in_place.LowCells, "step", lambda self, *a: steps.append(a[0].shape[1]) or real_step(self, *a))
    packs = [None]
    if prepacked.available():
        packs.append(tuple((prepacked.pack(paired[0][d].t()), prepacked.pack(paired[1][d].t())) for d in range(2)))
    for low_packs in packs:
        steps.clear()
        with torch.no_grad():
            got, got_finals = in_place.run_in_place(layers, projected, batch_sizes, states, paired, packed=True,
                                                    fused=True, low_packs=low_packs)
            with in_place.torch_cells():
                assert in_place._low_cells(paired, projected, None, None, 1) is None
                want, want_finals = in_place.run_in_place(layers, projected, batch_sizes, states, paired, packed=True,
                                                          fused=True, low_packs=low_packs)
        assert steps == [9, 9, 7, 5, 5, 3, 1]  # every timestep (no bf16_rows weights given: none is "few")
        # the same bfloat16 products and float32 sums; the cells' exp and tanh differ in the last bits
        torch.testing.assert_close(got, want, atol=1e-2, rtol=0)
        for (h, c), (wh, wc) in zip(got_finals, want_finals):
            torch.testing.assert_close(h, wh, atol=1e-2, rtol=0)
            torch.testing.assert_close(c, wc, atol=2e-6, rtol=0)
        assert got[6, :, 1:].abs().max() == 0  # zero past each row's end
        assert got.abs().max() <= 0.5  # the projection's clip


def test_the_summed_cells_kernel_is_the_cells_kernel_on_input_plus_product():
    from spacy_elmo.fast import in_place, kernel_library

    ops = kernel_library.library()
    if ops is None or not hasattr(ops, "lstm_cells_sum"):
        import pytest

        pytest.skip("no kernel library here")
    torch.manual_seed(5)
    n, dim = 7, 48
    first, product = torch.randn(n, 4 * dim) * 3, (torch.randn(n, 4 * dim) * 3).bfloat16()
    product[0, :dim] = torch.linspace(-30, 30, dim).bfloat16()  # sigmoid and tanh over their whole range
    cell = torch.randn(n, dim)
    for clip_value in (None, 0.8):
        want_cell, want_hidden = cell.clone()[None], torch.empty(1, n, dim)
        ops.lstm_cells((first + product.float())[None].contiguous(), want_cell, want_hidden, clip_value)
        for hidden_dtype in (torch.float32, torch.bfloat16):
            got_cell, got_hidden = cell.clone(), torch.empty(n, dim, dtype=hidden_dtype)
            ops.lstm_cells_sum(first, product, got_cell, got_hidden, clip_value)
            torch.testing.assert_close(got_cell, want_cell[0], atol=1e-6, rtol=0)
            want = want_hidden[0] if hidden_dtype == torch.float32 else want_hidden[0].bfloat16()
            torch.testing.assert_close(got_hidden.float(), want.float(), atol=1e-6 if hidden_dtype == torch.float32 else 8e-3, rtol=0)
        if clip_value is not None:
            assert got_cell.abs().max() <= clip_value
    import pytest

    with pytest.raises(RuntimeError, match="lstm_cells_sum: product"):
        ops.lstm_cells_sum(first, product.float(), cell.clone(), torch.empty(n, dim), None)
    with pytest.raises(RuntimeError, match="lstm_cells_sum: first"):
        ops.lstm_cells_sum(first[:, : 2 * dim], product, cell.clone(), torch.empty(n, dim), None)
