"""Whether bf16 autocast pays for training here: the training step's products timed in fp32 and in
bf16 on the run's shape, once per machine.

Training under CPU autocast to bfloat16 runs the LSTM's products in bfloat16 (``train_step.py``:
oneDNN's kernels, the operands rounded to bfloat16 and summed in float32). On CPUs with AVX512-BF16
and AMD's kernels that is the faster step (en_small's pretraining step: 1.6x float32 on an AMD EPYC
family 25, docs/pretraining.md), but having bf16 instructions does not make it so: on an Intel Xeon
(family 6 model 207) whose virtual machine shows AVX512-BF16 and no AMX, oneDNN's bfloat16 products
ran at 0.6x its float32 ones and the whole step at 0.71x float32
(``results/bench/intel-f6-m207/pretrain-step.json``). So fine-tuning's ``autocast = "auto"`` asks
``choose`` rather than the CPU's flags alone.

What is timed: one timestep of one LSTM layer as the training node runs it (``train_step.LSTMPSteps``),
forward (the recurrent product into the gates, the cell's projection) and backward (the hidden
state's gradient through the projection, the gates' gradient through the recurrent weights), for
``rows`` running rows, in float32 and in bfloat16 (the operands cast as the node casts them), in
``ROUNDS`` rounds, each timing both (which goes first alternates). bf16 is chosen unless it is
slower than float32 in the median of the rounds' ratios and at best both (``payoff.slower`` with no
margin: when the two run close, either costs the same). What it costs: the products ``2 x ROUNDS x
REPEATS`` times on random operands of the model's shape (about 0.15 s at en_small's, about a second at
the published model's), once per machine: the choice is kept in the kernel folder's ``routes.json``
(``route_cache``, keyed by the CPU and its flags, torch, the libraries' instruction switches, the
threads, the shape and the rows), so every run on the machine with those settings trains in the same
precision (a resumed run takes the precision its checkpoints recorded: ``finetune``). An entry that
is not one this module writes, or whose choice its own timings do not give, is timed again with a
warning. ``SPACY_ELMO_PRECISION_CHECK=0`` skips the measurement: "auto" is then bf16 wherever the
CPU has bf16 arithmetic, and the log says the check was off.
"""
import math
import os
import statistics
import time
from typing import Any, Callable, Dict, List, NamedTuple, Optional

import torch

from . import route_cache
from .payoff import ENV, slower
from .precision import BF16

ROUNDS = 7
ROWS = 256  # the most rows timed: a batch's sentences, the rows of its first timesteps, capped here
REPEATS = 3  # each round times the products this many times over (a timing of one en_small step is tens of microseconds)
METHOD = f"training products fp32 against bf16, {ROUNDS} interleaved rounds of {REPEATS}"
MEASURED = "measured"  # ``Choice.how`` when timed in this process (and kept)
UNKEPT = "unkept"  # timed in this process, but the kernel folder could not keep it
KEPT = "kept"  # when read from the kernel folder
ASSUMED = "assumed"  # when not timed: no bf16 arithmetic, or not a CPU
SWITCHED_OFF = "switched off"  # not timed: SPACY_ELMO_PRECISION_CHECK=0


class Choice(NamedTuple):
    """What fine-tuning's "auto" trains in and why.

    bf16 (bool): whether to train under bf16 autocast (``autocast``: the word for it). how (str):
    ``MEASURED``, ``UNKEPT``, ``KEPT``, ``ASSUMED`` or ``SWITCHED_OFF``. measured: the rounds'
    microseconds ({"fp32_us": [...], "bf16_us": [...], "rows": n}) where timed, else {}.
    """

    bf16: bool
    how: str
    measured: Dict[str, Any]

    @property
    def autocast(self) -> str:
        """``[training] autocast``'s word for the choice: "bf16" or "off"."""
        return "bf16" if self.bf16 else "off"

    def speed(self) -> Optional[float]:
        """bf16's speed against float32 in the median round (above 1: faster), where timed."""
        if not self.measured:
            return None
        return statistics.median(f / b for f, b in zip(self.measured["fp32_us"], self.measured["bf16_us"]))

    def note(self) -> str:
        """The log's words for the choice."""
        if self.how == ASSUMED:
            return "auto: this device has bf16 arithmetic" if self.bf16 else "auto: this device has no bf16 arithmetic"
        if self.how == SWITCHED_OFF:
            return f"auto: this CPU has bf16 arithmetic; not timed, {ENV}=0"
        timed = {MEASURED: f"timed now, kept in {route_cache.path()}", UNKEPT: "timed now, not kept",
                 KEPT: f"as timed before, {route_cache.path()}"}[self.how]
        return f"auto: bf16's training products ran at {self.speed():.2f}x float32's here; {timed}"


def choose(dim: int, projection_dim: int, rows: int, device: torch.device) -> Choice:
    """The precision fine-tuning's ``autocast = "auto"`` trains in on ``device`` for LSTM layers of
    cells ``dim`` and projections ``projection_dim``, ``rows`` sentences a batch (module docstring)."""
    if not BF16.pays_on(device):
        return Choice(False, ASSUMED, {})
    if device.type != "cpu":
        return Choice(True, ASSUMED, {})
    if os.environ.get(ENV, "1") == "0":
        return Choice(True, SWITCHED_OFF, {})
    key = route_cache.machine_key((torch.get_num_threads(), dim, projection_dim, rows), METHOD)
    kept = route_cache.read_entry(key, _valid)
    if kept is not None:
        return Choice(kept["bf16"], KEPT, kept["measured"])
    fp32_us, bf16_us = time_products(dim, projection_dim, rows)
    measured = {"fp32_us": fp32_us, "bf16_us": bf16_us, "rows": rows}
    bf16 = _decide(measured)
    written = route_cache.write_entry(key, {"bf16": bf16, "measured": measured}, what="the training precision")
    return Choice(bf16, MEASURED if written else UNKEPT, measured)


def _decide(measured: Dict[str, Any]) -> bool:
    """bf16 unless its rounds say it is the slower (module docstring)."""
    return not slower(measured["fp32_us"], measured["bf16_us"], margin=1.0)


def _valid(entry: Dict[str, Any]) -> bool:
    """A kept entry is read only where it is one this module writes: two lists of as many positive
    timings, the rows they ran, and the choice those timings give (an entry that says otherwise is
    not trusted: timed again)."""
    measured = entry.get("measured")
    if not isinstance(measured, dict) or not isinstance(entry.get("bf16"), bool):
        return False
    rounds = [measured.get(name) for name in ("fp32_us", "bf16_us")]
    if not all(isinstance(times, list) and times and len(times) == len(rounds[0]) for times in rounds):
        return False
    numbers = [t for times in rounds for t in times]
    if not all(isinstance(t, (int, float)) and not isinstance(t, bool) and math.isfinite(t) and t > 0 for t in numbers):
        return False
    rows = measured.get("rows")
    return isinstance(rows, int) and not isinstance(rows, bool) and rows > 0 and _decide(measured) == entry["bf16"]


def time_products(dim: int, projection_dim: int, rows: int) -> tuple:
    """One training timestep's four products (module docstring) in float32 and in bfloat16, ``ROUNDS``
    rounds of ``REPEATS``. RETURNS (Tuple[List[float], List[float]]): each round's microseconds, fp32 first."""
    runs = {"fp32": step_products(dim, projection_dim, rows, None),
            "bf16": step_products(dim, projection_dim, rows, torch.bfloat16)}
    times: Dict[str, List[float]] = {name: [] for name in runs}
    with torch.no_grad():
        for run in runs.values():
            run()  # warm-up: oneDNN makes its kernels at the first call of a shape
        for r in range(ROUNDS):
            for name in (("fp32", "bf16") if r % 2 == 0 else ("bf16", "fp32")):
                start = time.perf_counter()
                for _ in range(REPEATS):
                    runs[name]()
                times[name].append((time.perf_counter() - start) * 1e6 / REPEATS)
    return times["fp32"], times["bf16"]


def step_products(dim: int, projection_dim: int, rows: int, low: Optional[torch.dtype]) -> Callable[[], None]:
    """One timestep's products of the training node for ``rows`` rows, in float32 (``low`` None) or with
    the operands cast to ``low`` as ``LSTMPSteps`` casts them (the weights once a pass, outside)."""
    generator = torch.Generator().manual_seed(0)
    w_state = torch.randn(4 * dim, projection_dim, generator=generator) * 0.05
    w_proj = torch.randn(projection_dim, dim, generator=generator) * 0.05
    h = torch.randn(rows, projection_dim, generator=generator)
    hidden = torch.randn(rows, dim, generator=generator)
    d_raw = torch.randn(rows, projection_dim, generator=generator)
    d_gates = torch.randn(rows, 4 * dim, generator=generator)
    if low is None:
        recurrent, projection = w_state.t(), w_proj.t()
        gates, out = torch.empty(rows, 4 * dim), torch.empty(rows, projection_dim)
        d_hidden, dh = torch.empty(rows, dim), torch.empty(rows, projection_dim)

        def run() -> None:
            torch.mm(h, recurrent, out=gates)
            torch.mm(hidden, projection, out=out)
            torch.mm(d_raw, w_proj, out=d_hidden)
            torch.mm(d_gates, w_state, out=dh)

        return run
    recurrent, projection = w_state.t().to(low), w_proj.t().to(low)
    weights = (w_state.to(low), w_proj.to(low))

    def run_low() -> None:
        torch.mm(h.to(low), recurrent)
        torch.mm(hidden.to(low), projection)
        torch.mm(d_raw.to(low), weights[1])
        torch.mm(d_gates.to(low), weights[0])

    return run_low
