"""The lockstep pair's timestep loop in C++, from the kernel library (``kernel_library.py``).

One sentence at a time, an LSTM timestep of a small model is a few microseconds of arithmetic
and about fifty torch operator calls from Python, each costing microseconds of dispatch
(bench/profile_step.py). ``csrc/lstmp_steps.cpp`` runs the loop of ``in_place.run_in_place`` for
float32 paired weights in one call: per timestep the recurrent product (``baddbmm``), one
vectorized loop for the gates, cell and hidden state (``csrc/cell_math.cpp``: exp and tanh
written out within about 1 ulp, so that the compiler vectorizes them) and the projection
(``bmm``); on the oneDNN route (``prepacked.py``) both products are oneDNN's on the pair's
prepacked weights, one direction after the other. Its outputs are within 1e-5 of the float64 reference on full windows of deep stacks
(tests/fast/test_default_path_parity.py), as the reference loop's are. ``dispatch.py`` decides
when it runs: only for a runner that is not ``exact``; ``kernel_library.py`` builds, verifies and
loads the library (where it cannot, the Python loop runs).
"""
from typing import Callable, List, Optional, Sequence, Tuple

import torch

from ..bilm.lstm import LSTMPLayer, State
from . import kernel_library
from .in_place import final_hidden
from .prepacked import PairPacks


def compiled_step(build: bool = True) -> Optional[Callable]:
    """The kernel library's ``lstmp_steps`` op (of the variant in use) where the library is
    available (built if missing and ``build``), else None (``kernel_library.library``)."""
    ops = kernel_library.library(build=build)
    return None if ops is None else ops.lstmp_steps


def usable(projected: torch.Tensor) -> bool:
    """Whether a lockstep pair may take the compiled loop for ``projected``."""
    return (
        projected.device.type == "cpu"
        and projected.dtype == torch.float32
        and projected.is_contiguous()
        and compiled_step() is not None
    )


def run_pair_compiled(
    layers: Sequence[LSTMPLayer],
    projected: torch.Tensor,
    batch_sizes: Sequence[int],
    states: Sequence[State],
    paired: Tuple[torch.Tensor, torch.Tensor],
    onednn: Optional[PairPacks] = None,
) -> Tuple[torch.Tensor, List[State]]:
    """``in_place.run_in_place(layers, projected, batch_sizes, states, paired, packed=True, fused=True,
    onednn=onednn)``, with the timestep loop in C++ (check ``usable`` first). Same arguments and results."""
    layer = layers[0]
    h0 = torch.stack([h for h, _ in states])
    cell = torch.stack([c for _, c in states])
    sizes = [int(n) for n in batch_sizes]
    out = projected.new_zeros(len(sizes), len(layers), h0.shape[1], layer.projection_dim)
    state_packs, projection_packs = ([], []) if onednn is None else (list(onednn.state), list(onednn.projection))
    compiled_step()(
        projected, h0, cell, sizes, paired[0], paired[1], layer.cell_clip, layer.proj_clip, out, state_packs, projection_packs
    )
    finals = [(final_hidden(out[:, d], h0[d], sizes), cell[d]) for d in range(len(layers))]
    return out, finals
