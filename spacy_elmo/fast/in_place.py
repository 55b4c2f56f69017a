"""The LSTMP timesteps in place, without autograd: what inference runs instead of the reference loop.

``bilm.lstm.LSTMPLayer.steps`` makes new tensors at every step. Here the step runs on
preallocated time-major buffers: each timestep is one recurrent product written into the gates
buffer, a few in-place elementwise ops (``cell_step_in_place``, ``cell_step``'s math in the same
order, so bitwise equal) and the projection. The same loop steps D layers of one shape (the two
directions, see lockstep.py) with batched products on their paired weights. Where the loop may
move at float32 rounding (``fused``: the reduced precisions' and the Python fallback's loops), the
cells of all running rows run in one call of the kernel library (``lstm_cells``: the arithmetic of
the compiled float32 loop, exp and tanh within about 1 ulp) instead of about ten torch operations.
"""
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

import torch
from torch import nn

from ..bilm.lstm import LSTMPLayer, State, clip
from . import bf16_rows, int8_rows, kernel_library, prepacked
from .prepacked import PairPacks
from .switches import ThreadSwitch

_TORCH_CELLS = ThreadSwitch()


def torch_cells():
    """Within this block (this thread), the fused in-place loop runs its cells in torch operations,
    not in the kernel library (for comparisons and benchmarks)."""
    return _TORCH_CELLS.on()


def cell_kernels(projected: torch.Tensor) -> Optional[Any]:
    """The kernel library's ops where they run the fused loop's cells: float32 on the CPU, the
    library available, not within ``torch_cells``; else None."""
    if projected.device.type != "cpu" or projected.dtype != torch.float32 or _TORCH_CELLS.active:
        return None
    ops = kernel_library.library()
    return ops if ops is not None and hasattr(ops, "lstm_cells") else None


def run_in_place(
    layers: Sequence[LSTMPLayer],
    projected: torch.Tensor,
    batch_sizes: Sequence[int],
    states: Sequence[State],
    paired: Optional[Tuple[torch.Tensor, torch.Tensor]] = None,
    packed: bool = False,
    *,
    fused: bool = False,
    row_weights: Optional[Tuple[torch.Tensor, torch.Tensor]] = None,
    int8: Optional[Tuple] = None,
    onednn: Optional[PairPacks] = None,
    low_packs: Optional[Tuple[Tuple[torch.Tensor, torch.Tensor], ...]] = None,
) -> Tuple[torch.Tensor, List[State]]:
    """The timesteps of D layers of one shape (directions) over the same batch sizes, without autograd.

    layers (Sequence[LSTMPLayer]): the D layers.
    projected (Tensor): input projections: (D, T, B, 4 * dim), time-major; or, if ``packed``,
        (D, sum(batch_sizes), 4 * dim): the running rows only, timestep after timestep.
    batch_sizes (Sequence[int]): rows still running at each timestep.
    states (Sequence[State]): initial (h, c) of each layer; not modified.
    paired (Optional[Tuple[Tensor, Tensor]]): recurrent and projection weights of all D layers as
        (D, proj, 4 * dim) and (D, dim, proj), for batched products; required when D > 1.
    RETURNS (Tuple[Tensor, List[State]]): outputs (T, D, B, proj), zero past each row's end, and
        each layer's final state.
    packed (bool): ``projected`` holds the running rows only.
    fused (bool): tanh through sigmoid, with the step's ops fused where the values allow (see
        ``cell_step_in_place``); on CPU only.
    row_weights (Optional[Tuple[Tensor, Tensor]]): with bfloat16 ``paired`` weights, the same
        weights packed for ``bf16_rows``: timesteps of up to ``bf16_rows.ROWS`` rows take its
        products (the same bf16 contract, read at the memory's rate for one sentence).
    int8 (Optional[Tuple]): the recurrent and projection entries of ``lockstep.int8_weights``: every
        product on ``int8_rows``' kernel for all D layers at once.
    onednn (Optional[PairPacks]): with float32 ``paired`` weights, the same weights prepacked for
        oneDNN (``prepacked.pair_packs``): every product on them, one layer after the other.
    low_packs: with bfloat16 ``paired`` weights, per layer its (recurrent, projection) copies
        prepacked for oneDNN (``lockstep.bf16_onednn_weights``): the timesteps of more rows than
        ``row_weights`` take take them, one layer after the other.
    """
    layer = layers[0]
    n_dir, steps, batch = projected.shape[0], len(batch_sizes), states[0][0].shape[0]
    dim = layer.dim
    h0 = torch.stack([h for h, _ in states])
    c = torch.stack([c for _, c in states])  # updated in place; a row that has ended keeps its final cell
    out = projected.new_zeros(steps, n_dir, batch, layer.projection_dim)
    gates_buffer = projected.new_empty(n_dir * batch * 4 * dim)
    hidden_buffer = projected.new_empty(n_dir * batch * dim)
    recurrent, project = _step_products(layer, paired, projected, n_dir * batch * 4 * dim, row_weights, int8, onednn, low_packs)
    low = _low_cells(paired, projected, low_packs, row_weights, n_dir * batch * dim) if fused else None
    h = h0
    views: Dict[int, Tuple[torch.Tensor, torch.Tensor, InPlaceStep]] = {}  # per number of running rows: the step's buffers
    fused = fused and projected.device.type == "cpu"
    kernels = cell_kernels(projected) if fused and c.is_contiguous() else None
    unit_cells = _unit_cells(int8) if kernels is not None else None
    two, one = projected.new_tensor(2.0), projected.new_tensor(1.0)
    out_steps = out.unbind(0)  # views made once: indexing costs microseconds a step
    if packed:
        step_inputs = projected.split(list(batch_sizes), dim=1)
    for t in range(steps):
        n = batch_sizes[t]
        if n == 0:
            break
        if n not in views:
            g = gates_buffer[: n_dir * n * 4 * dim].view(n_dir, n, 4 * dim)
            parts = (g[..., k * dim : (k + 1) * dim] for k in range(4))
            views[n] = (g, c[:, :n], InPlaceStep(*parts, hidden_buffer[: n_dir * n * dim].view(n_dir, n, dim), two, one))
        gates, cell, buffers = views[n]
        step_input = step_inputs[t] if packed else projected[:, t, :n]
        h_new = out_steps[t] if n == batch else out_steps[t][:, :n]
        if low is not None and n > low.few:  # bfloat16 products, their cast and add within the cells
            low.step(step_input, h if n == batch else h[:, :n], c, h_new, layer.cell_clip)
            clip(h_new, layer.proj_clip, in_place=True)
            h = out_steps[t]
            continue
        if unit_cells is not None:  # int8: the recurrent product and the cells in one call
            hidden = buffers.product
            unit_cells(h if n == batch else h[:, :n], step_input, c, hidden, layer.cell_clip)
            h = out_steps[t]
            project(hidden, h_new)
            clip(h_new, layer.proj_clip, in_place=True)
            continue
        recurrent(step_input, h if n == batch else h[:, :n], gates)
        if kernels is not None:  # the cells of all running rows, both directions, in one call
            hidden = buffers.product
            kernels.lstm_cells(gates, c, hidden, layer.cell_clip)
        else:
            hidden, _ = cell_step_in_place(gates, cell, dim, layer.cell_clip, buffers, fused=fused)
        h = out_steps[t]
        project(hidden, h_new)
        clip(h_new, layer.proj_clip, in_place=True)
    finals = [(final_hidden(out[:, d], h0[d], batch_sizes), c[d]) for d in range(n_dir)]
    return out, finals


StepProduct = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], None]


class LowCells:
    """The timesteps of more than ``few`` rows with bfloat16 weights, in three calls a direction: the
    recurrent product in bfloat16; the kernel library's ``lstm_cells_sum``, which runs ``lstm_cells``'
    arithmetic on the step's input plus that bfloat16 product (summed in float32 as it reads them,
    no gates stored) and writes the hidden state in bfloat16; the projection of that hidden state.
    Op by op the product was cast into the gates, the input added and the hidden state cast: the same
    float32 sums of the same terms, in three more passes over the step's buffers.
    """

    def __init__(self, ops: Any, paired: Tuple[torch.Tensor, torch.Tensor], low_packs, few: int, numel: int,
                 like: torch.Tensor) -> None:
        self.ops, self.paired, self.low_packs, self.few = ops, paired, low_packs, few
        self.hidden = like.new_empty(numel, dtype=paired[0].dtype)

    def step(self, p: torch.Tensor, h: torch.Tensor, c: torch.Tensor, dest: torch.Tensor,
             cell_clip: Optional[float]) -> None:
        """One timestep of the n running rows: ``p`` (D, n, 4 * dim) their input products, ``h`` (D, n,
        proj) their hidden states, ``c`` (D, B, dim) the cells (the first n rows updated), ``dest``
        (D, n, proj) gets the new hidden states before their clip."""
        n_dir, n = p.shape[0], p.shape[1]
        low_dtype = self.paired[0].dtype
        hidden = self.hidden[: n_dir * n * c.shape[2]].view(n_dir, n, c.shape[2])
        if self.low_packs is not None:
            products = [prepacked.product(h[d].to(low_dtype), pack) for d, (pack, _) in enumerate(self.low_packs)]
        else:
            products = torch.bmm(h.to(low_dtype), self.paired[0]).unbind(0)
        for d in range(n_dir):
            self.ops.lstm_cells_sum(p[d], products[d], c[d, :n], hidden[d], cell_clip)
        if self.low_packs is not None:
            for d, (_, pack) in enumerate(self.low_packs):
                dest[d].copy_(prepacked.product(hidden[d], pack))
        else:
            dest.copy_(torch.bmm(hidden, self.paired[1]))


def _low_cells(paired, projected: torch.Tensor, low_packs, row_weights, numel: int) -> Optional[LowCells]:
    """``LowCells`` where the weights are bfloat16 copies (``paired``), on the CPU, with the kernel
    library's ``lstm_cells_sum`` (not within ``torch_cells``); else None: the step runs op by op."""
    if paired is None or paired[0].dtype == projected.dtype or projected.dtype != torch.float32:
        return None
    if projected.device.type != "cpu" or _TORCH_CELLS.active:
        return None
    ops = kernel_library.library()
    if ops is None or not hasattr(ops, "lstm_cells_sum"):
        return None
    return LowCells(ops, paired, low_packs, _few_rows(row_weights), numel, projected)


def _unit_cells(int8) -> Optional[Callable[..., None]]:
    """With int8 recurrent weights packed by unit (``int8_rows.pack_cells``), a timestep's product and
    cells in one call: ``step(h, p, c, hidden, cell_clip)``; else None."""
    if int8 is None or not int8[0][0].by_unit:
        return None
    weights, bias = int8[0]
    return lambda h, p, c, hidden, cell_clip: int8_rows.cells(h, weights, bias, p, c, hidden, cell_clip)


def _few_rows(row_weights) -> int:
    """The most running rows whose bfloat16 products take ``bf16_rows``' kernel: its ``ROWS`` where its
    packed weights are at hand, else none."""
    return bf16_rows.ROWS if row_weights is not None else 0


def _step_products(
    layer: LSTMPLayer,
    paired: Optional[Tuple[torch.Tensor, torch.Tensor]],
    projected: torch.Tensor,
    gates_numel: int,
    row_weights: Optional[Tuple[torch.Tensor, torch.Tensor]] = None,
    int8: Optional[Tuple] = None,
    onednn: Optional[PairPacks] = None,
    low_packs: Optional[Tuple[Tuple[torch.Tensor, torch.Tensor], ...]] = None,
) -> Tuple[StepProduct, StepProduct]:
    """The two products of an in-place timestep for these weights: ``recurrent(p, h, gates)``
    writes ``p + h @ W_state`` into ``gates``; ``project(hidden, dest)`` writes ``hidden @ W_proj``
    into ``dest``. All tensors are (D, n, width).

    paired: both directions' weights stacked (float32, or bfloat16 copies: then each product casts
    its input and adds in float32); without them one layer's own linear maps (plain, or the
    reduced-precision stand-ins of precision.py). ``int8``: both directions' int8 weights and biases
    (``lockstep.int8_weights``), in the order of the layers' own int8 products (bias, then ``p``).
    ``onednn``: the float32 weights prepacked for oneDNN, one product per layer (``prepacked.product``).
    """
    if onednn is not None:

        def recurrent(p: torch.Tensor, h: torch.Tensor, gates: torch.Tensor) -> None:
            for d, packed in enumerate(onednn.state):
                gates[d].copy_(prepacked.product(h[d], packed, add=p[d]))

        def project(hidden: torch.Tensor, dest: torch.Tensor) -> None:
            for d, packed in enumerate(onednn.projection):
                dest[d].copy_(prepacked.product(hidden[d], packed))

    elif int8 is not None:
        (state_weights, state_bias), (projection_weights, projection_bias) = int8

        order = int8_rows.unit_order(layer.dim) if state_weights.by_unit else None

        def recurrent(p: torch.Tensor, h: torch.Tensor, gates: torch.Tensor) -> None:
            if order is None:
                int8_rows.product(h, state_weights, gates, bias=state_bias, add=p)
            else:  # weights packed by unit (cells in torch operations): the same sums, put back in gate order
                gates[..., order] = int8_rows.product(h, state_weights, torch.empty_like(gates), bias=state_bias,
                                                      add=p[..., order].contiguous())

        def project(hidden: torch.Tensor, dest: torch.Tensor) -> None:
            int8_rows.product(hidden, projection_weights, dest, bias=projection_bias)

    elif paired is not None and paired[0].dtype != projected.dtype:  # bfloat16 weights: cast each step
        state_weights, projection_weights = paired
        low: List[torch.Tensor] = []  # the products' buffer, made at first use (LowCells may take every step)
        few = _few_rows(row_weights)

        def recurrent(p: torch.Tensor, h: torch.Tensor, gates: torch.Tensor) -> None:
            if gates.shape[1] <= few:
                bf16_rows.product(h, row_weights[0], gates, add=p)
                return
            if low_packs is not None:
                for d, (state_pack, _) in enumerate(low_packs):
                    gates[d].copy_(prepacked.product(h[d].to(state_weights.dtype), state_pack)).add_(p[d])
                return
            if not low:
                low.append(projected.new_empty(gates_numel, dtype=state_weights.dtype))
            product = torch.bmm(h.to(state_weights.dtype), state_weights, out=low[0][: gates.numel()].view(gates.shape))
            gates.copy_(product).add_(p)  # a quarter faster than one add of mixed types

        def project(hidden: torch.Tensor, dest: torch.Tensor) -> None:
            if hidden.shape[1] <= few:
                bf16_rows.product(hidden, row_weights[1], dest)
                return
            if low_packs is not None:
                for d, (_, projection_pack) in enumerate(low_packs):
                    dest[d].copy_(prepacked.product(hidden[d].to(projection_weights.dtype), projection_pack))
                return
            dest.copy_(torch.bmm(hidden.to(projection_weights.dtype), projection_weights))

    elif paired is not None:
        state_weights, projection_weights = paired

        def recurrent(p: torch.Tensor, h: torch.Tensor, gates: torch.Tensor) -> None:
            torch.baddbmm(p, h, state_weights, out=gates)

        def project(hidden: torch.Tensor, dest: torch.Tensor) -> None:
            if dest.is_contiguous():  # every row still running
                torch.bmm(hidden, projection_weights, out=dest)
            else:
                dest.copy_(torch.bmm(hidden, projection_weights))

    elif type(layer.state_linearity) is nn.Linear and layer.state_linearity.weight.dtype == projected.dtype:

        def recurrent(p: torch.Tensor, h: torch.Tensor, gates: torch.Tensor) -> None:
            torch.addmm(p[0], h[0], layer.state_linearity.weight.t(), out=gates[0])

        def project(hidden: torch.Tensor, dest: torch.Tensor) -> None:
            torch.mm(hidden[0], layer.projection.weight.t(), out=dest[0])

    else:  # reduced-precision stand-ins for the linear layers (see precision.py)

        def recurrent(p: torch.Tensor, h: torch.Tensor, gates: torch.Tensor) -> None:
            torch.add(layer.state_linearity(h[0]), p[0], out=gates[0])

        def project(hidden: torch.Tensor, dest: torch.Tensor) -> None:
            dest[0].copy_(layer.projection(hidden[0]))

    return recurrent, project


class InPlaceStep(NamedTuple):
    """What an in-place timestep over ``n`` running rows works in, besides its gates and cells:
    views made once per ``n``, since making a view costs microseconds a step."""

    i: torch.Tensor  # the four gates' parts of the (D, n, 4 * dim) gates buffer
    j: torch.Tensor
    f: torch.Tensor
    o: torch.Tensor
    product: torch.Tensor  # (D, n, dim): receives i * j, then the hidden state
    two: torch.Tensor  # the constants of tanh through sigmoid, as tensors: a Python float costs
    one: torch.Tensor  # each op a conversion (5.7 us against 2.5 per op)


def cell_step_in_place(
    gates: torch.Tensor, cell: torch.Tensor, dim: int, cell_clip: Optional[float], buffers: "InPlaceStep", *, fused: bool
) -> State:
    """``bilm.lstm.cell_step`` in place, for inference: the gates and the cell are overwritten and
    the hidden state is written into ``buffers.product`` (``buffers`` holds views of ``gates``).
    It computes in ``cell_step``'s order, so without ``fused`` its results are bitwise equal.

    fused (bool): on CPU, tanh taken as 2 * sigmoid(2x) - 1 (within 2.5e-7) with one sigmoid over
        all four gates.
    RETURNS (State): the hidden state before the projection, and the new cell.
    """
    b = buffers
    if fused:
        b.j.mul_(b.two)
        gates.sigmoid_()
        b.j.mul_(b.two).sub_(b.one)
    else:
        b.i.sigmoid_()
        b.j.tanh_()
        gates[..., 2 * dim :].sigmoid_()
    torch.mul(b.i, b.j, out=b.product)
    clip(cell.mul_(b.f).add_(b.product), cell_clip, in_place=True)
    if fused:
        hidden = torch.mul(cell, b.two, out=b.product).sigmoid_().mul_(b.two).sub_(b.one)
    else:
        hidden = b.product.copy_(cell).tanh_()
    return hidden.mul_(b.o), cell


def final_hidden(out: torch.Tensor, h0: torch.Tensor, batch_sizes: Sequence[int]) -> torch.Tensor:
    """Each row's output at its own last timestep (time-major ``out``), or its initial h if it never ran."""
    batch = h0.shape[0]
    # row r ran at every timestep with more than r rows: one op, not one per timestep; counted on the
    # CPU beside the CPU batch sizes, the rows then moved to out.device
    sizes = torch.as_tensor(list(batch_sizes), dtype=torch.long, device="cpu")
    steps_run = (sizes[:, None] > torch.arange(batch, device="cpu")).sum(0)
    final = h0.clone()
    rows = torch.nonzero(steps_run > 0).flatten()
    if len(rows):
        last = (steps_run[rows] - 1).to(out.device)
        rows = rows.to(out.device)
        final[rows] = out[last, rows]
    return final


