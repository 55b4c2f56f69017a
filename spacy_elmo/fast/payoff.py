"""Whether a reduced precision pays against fp32 here, and where fp32's products run fastest: measured once.

Routes: where the fp32 products run (``prepacked.py``: torch's, MKL on CPU, or oneDNN's on
prepacked weights) is chosen by ``choose_routes`` when ``optimize_for_inference`` runs, on the
model's own weights: each regime's products in both routes, in ``ROUNDS`` interleaved rounds, as
below; oneDNN's only where it is faster by more than ``ROUTE_MARGIN``. Once per machine, model
shape and thread count: the choice is kept in the kernel folder (``route_cache.py``) and later
processes take it from there; ``chosen_routes`` gives what was measured, for the run record. What it
costs: both regimes' products 2 x ``ROUNDS`` times on the model's weights, and packing them once (the
full published model: about 10 GFLOP a batch round, its 168 MB of recurrent weights read per
one-sentence round), once per machine and model shape; the run record's ``fp32_routes`` has the times.

Precisions:

bf16, fp16 and int8 read fewer bytes of weight per product, but whether they run faster than
fp32 depends on the CPU's kernels, and on the regime: on an AMD EPYC with AVX512-BF16 but no AMX,
bf16 was slower than fp32 one sentence at a time on torch's products, and on batches too
(docs/speed.md). So the first pass of a model in a reduced precision in each regime ("one
sentence": one row; "batch": more) times that pass's timestep products (the recurrent products and
projections of every layer, both directions, at the pass's first timestep's rows), in the precision
and in fp32 on the same weights, in ``ROUNDS`` rounds, each round timing both one after the other
(which goes first alternates). A loaded machine slows single timings at random (the best of a few
fp32 timings once came out three times faster than the rest), so the precision counts as slower only
where both the median of the rounds' ratios and the ratio of the best times exceed ``MARGIN``: a
burst of load in some rounds moves neither, slowness that holds in most rounds moves both. Then one
RuntimeWarning says so with the numbers. Nothing changes: the precision asked for is the one that
runs (never switched by batch size). Once per process for each precision,
regime and layer shape; ``SPACY_ELMO_PRECISION_CHECK=0`` skips the measurement.

What it costs: a timestep's products 2 x ``ROUNDS`` times, their weights read from memory each
time (the full published model: 168 MB of fp32 weights a timestep, half that in bf16), once;
results/bench/amd-f25-m17/one-sentence.md gives what one timestep's products took on a loaded
two-core EPYC. What it does not
see: the input projections, one product per sentence, a larger share of a batch's time than of
one sentence's; and the machine's load at that moment (a busy machine can tip a close call either
way, so the warning gives the numbers and says how they were measured).
"""
import contextlib
import os
import statistics
import time
import warnings
from typing import Any, Callable, Dict, List, Optional, Sequence, Set, Tuple

import torch

from ..bilm.lstm import LSTMPLayer, LSTMPStack
from . import bf16_rows, int8_rows, prepacked, route_cache
from .lockstep import bf16_onednn_weights, bf16_row_weights, bf16_weights, int8_weights, paired_weights
from .precision import FP32, Kernels, Precision

ENV = "SPACY_ELMO_PRECISION_CHECK"  # "0": never measure, never warn
ROUNDS = 7
# slower than fp32 by more than this factor, in the median round and at best: warn (a loaded machine
# moves single products by more than 10%: results/bench/amd-f25-m17/one-sentence.md)
MARGIN = 1.25
_SAID: Set[Tuple] = set()


def check_pass(forward: LSTMPStack, backward: LSTMPStack, rows: int, precision: Precision) -> None:
    """Before a pass whose first timestep has ``rows`` rows: measure (once per precision, regime and
    shape) and warn where ``precision`` (the runner's) is slower than fp32 (see the module docstring)."""
    if not precision.reduced or os.environ.get(ENV, "1") == "0":
        return
    layer = forward.layers[0]
    if layer.state_linearity.weight.device.type != "cpu":
        return  # the question is a CPU's kernels: a GPU's bf16 runs on its tensor cores
    regime = "one sentence" if rows == 1 else "batch"
    key = (precision, regime, layer.dim, layer.projection_dim, len(forward.layers))
    if key in _SAID:
        return
    _SAID.add(key)
    pairs = list(zip(forward.layers, backward.layers))
    if any(paired_weights(*pair) is None for pair in pairs):
        return  # the directions run one after the other: not the layout measured here
    # fp32 as it would run here: on the route chosen for this regime (``choose_routes``, kept per machine)
    fp32_route = choose_routes(forward, backward).of_pass(rows)
    try:
        fp32_us, precision_us = time_products(pairs, precision, rows, fp32_route)
    finally:
        if fp32_route == prepacked.ONEDNN:
            for pair in pairs:  # packed for the measurement only: this model runs in ``precision``
                prepacked.forget(pair[0])
    warn_if_slower(precision, regime, rows=rows, fp32_us=fp32_us, precision_us=precision_us, fp32_route=fp32_route)


def slower(fp32_us: Sequence[float], precision_us: Sequence[float], margin: float = MARGIN) -> bool:
    """Whether rounds of timings say the precision is slower than fp32 by more than ``margin``: in the
    median of the rounds' ratios and in the ratio of the best times both."""
    ratios = [p / f for f, p in zip(fp32_us, precision_us)]
    return statistics.median(ratios) > margin and min(precision_us) > margin * min(fp32_us)


def warn_if_slower(
    precision: Precision, regime: str, *, rows: int, fp32_us: Sequence[float], precision_us: Sequence[float],
    fp32_route: str = prepacked.TORCH,
) -> bool:
    """Warn where ``slower`` (the two lists: the rounds' microseconds, round by round).

    RETURNS (bool): whether it warned.
    """
    if not slower(fp32_us, precision_us):
        return False
    speeds = sorted(f / p for f, p in zip(fp32_us, precision_us))
    warnings.warn(
        f'precision "{precision.name}" is slower than fp32 here, {regime} at a time: a timestep\'s products '
        f"({rows} row{'s' if rows > 1 else ''}, every layer, both directions) took {min(precision_us):.0f} us "
        f"against {min(fp32_us):.0f} us in fp32 at best ({min(fp32_us) / min(precision_us):.2f}x fp32), "
        f"{statistics.median(speeds):.2f}x fp32 in the median round (range {speeds[0]:.2f}-{speeds[-1]:.2f}; "
        f"{len(speeds)} rounds, measured on this model's weights at its first such pass, fp32 on its {fp32_route} route). precision \"fp32\" is "
        f"likely faster on this CPU; docs/speed.md has the measurements ({ENV}=0 skips this check)",
        RuntimeWarning,
        stacklevel=4,
    )
    return True


def time_products(
    pairs: Sequence[Tuple[LSTMPLayer, LSTMPLayer]], precision: Precision, rows: int, fp32_route: str = prepacked.TORCH
) -> Tuple[List[float], List[float]]:
    """One timestep's products for ``rows`` rows in fp32 (on ``fp32_route``) and in ``precision``,
    ``ROUNDS`` rounds, each timing both (the first of the two alternating between rounds).

    RETURNS (Tuple[List[float], List[float]]): the rounds' microseconds of each, fp32 first.
    """
    products = step_products(pairs, precision, rows, fp32_route)
    names = [FP32, precision]
    times: Dict[Precision, List[float]] = {name: [] for name in names}
    with torch.no_grad():
        for name in names:
            products[name]()  # warm-up: reduced-precision copies are made on first use
        for r in range(ROUNDS):
            for name in names if r % 2 == 0 else names[::-1]:
                start = time.perf_counter()
                products[name]()
                times[name].append((time.perf_counter() - start) * 1e6)
    return times[FP32], times[precision]


def step_products(
    pairs: Sequence[Tuple[LSTMPLayer, LSTMPLayer]], precision: Precision, rows: int, fp32_route: str = prepacked.TORCH
) -> Dict[Precision, Callable[[], None]]:
    """One timestep's recurrent products and projections on paired layer pairs, for ``rows`` rows of
    random inputs: ``FP32`` (the paired float32 weights, on ``fp32_route``: ``route_products``) and
    ``precision``, as the runner computes them
    (bf16: the packed kernel up to ``bf16_rows.ROWS`` rows where it is built, else the copies prepacked
    for oneDNN, else torch's bf16 products; int8: ``int8_rows``' kernel on both directions at once where it is built; fp16 and
    int8 elsewhere: the layers' reduced-precision stand-ins, one direction at a time).
    RETURNS (Dict[Precision, Callable[[], None]]): each runs the products once."""
    paired = [paired_weights(*pair) for pair in pairs]
    proj, gates = paired[0][1].shape[1], paired[0][1].shape[2]
    h, hidden = torch.randn(2, rows, proj), torch.randn(2, rows, gates // 4)
    p, out_gates, out = torch.randn(2, rows, gates), torch.empty(2, rows, gates), torch.empty(2, rows, proj)

    products: Dict[Precision, Callable[[], None]] = {FP32: route_products(pairs, rows, 0)[fp32_route]}
    if precision.kernels is Kernels.BF16:
        packed = [bf16_row_weights(pair, weights) for pair, weights in zip(pairs, paired)]
        low = [bf16_weights(pair, weights) for pair, weights in zip(pairs, paired)]
        onednn = [bf16_onednn_weights(pair, weights) for pair, weights in zip(pairs, paired)]
        if packed[0] is not None and rows <= bf16_rows.ROWS:
            products[precision] = lambda: [
                (bf16_rows.product(h, w[0], out_gates, add=p), bf16_rows.product(hidden, w[1], out)) for w in packed
            ]
        elif onednn[0] is not None:
            products[precision] = lambda: [
                (out_gates[d].copy_(prepacked.product(h[d].bfloat16(), w[0])).add_(p[d]),
                 out[d].copy_(prepacked.product(hidden[d].bfloat16(), w[1])))
                for packs in onednn for d, w in enumerate(packs)
            ]
        else:
            products[precision] = lambda: [
                (out_gates.copy_(torch.bmm(h.bfloat16(), w[1])).add_(p), out.copy_(torch.bmm(hidden.bfloat16(), w[2])))
                for w in low
            ]
    elif precision.kernels is Kernels.INT8 and int8_rows.rows_op() is not None:
        quantized = [int8_weights(pair) for pair in pairs]
        products[precision] = lambda: [
            (int8_rows.product(h, q[1][0], out_gates, bias=q[1][1], add=p), int8_rows.product(hidden, q[2][0], out, bias=q[2][1]))
            for q in quantized
        ]
    else:
        products[precision] = lambda: [
            (torch.add(layer.state_linearity(h[d]), p[d], out=out_gates[d]), out[d].copy_(layer.projection(hidden[d])))
            for pair in pairs
            for d, layer in enumerate(pair)
        ]
    return products


def forget_said() -> None:
    """Measure and warn again (the next pass in each precision and regime), and choose the routes again."""
    _SAID.clear()
    _ROUTES.clear()


# Rows of the products timed for each route (``choose_routes``): a timestep of one sentence; a
# timestep of a batch of 64, with the first layer's input products of 128 positions.
ROUTE_ROWS = {"one_sentence": 1, "batch": 64}
ROUTE_INPUT_ROWS = 128
# oneDNN's route is taken only where it is faster than torch's by more than this factor, in the
# median round and at best: where MKL is as fast, MKL stays.
ROUTE_MARGIN = 1.1
# per model shape and thread count: the routes chosen and what was measured (the run record's)
_ROUTES: Dict[Tuple, Tuple[prepacked.Routes, Dict[str, Any]]] = {}
# how the routes are chosen, in the kept choices' key: a change of method measures again
ROUTE_METHOD = "routes 1"
_MEASURE_ANEW: List[Optional[bool]] = [None]  # None: not within measuring_anew; else whether to keep


@contextlib.contextmanager
def measuring_anew(keep: bool = True):
    """Within this block, ``choose_routes`` measures even where a choice is kept for this machine,
    and keeps the new one in its place (``python -m spacy_elmo kernels --routes``), or with
    ``keep=False`` leaves the kept choices as they are (a benchmark's)."""
    _MEASURE_ANEW[0] = keep
    try:
        yield
    finally:
        _MEASURE_ANEW[0] = None


def choose_routes(forward: LSTMPStack, backward: LSTMPStack) -> prepacked.Routes:
    """The route of the float32 products in each regime for these stacks (paired, float32; see
    ``prepacked.py``), measured on their own weights once per machine, model shape and thread count
    (kept by ``route_cache``; ``measuring_anew`` measures again).

    Each regime's products (``route_products``) run in both routes in ``ROUNDS`` rounds, the first of
    the two alternating; oneDNN's is taken where it is faster by more than ``ROUTE_MARGIN`` in the median
    of the rounds' ratios and in the ratio of the best times. Without the measurement (no oneDNN here,
    weights not float32 on CPU or not paired, or ``SPACY_ELMO_PRECISION_CHECK=0``): torch's route.
    RETURNS (Routes): the routes.
    """
    pairs = list(zip(forward.layers, backward.layers))
    weight = pairs[0][0].state_linearity.weight if pairs else None
    if (
        weight is None
        or not prepacked.usable(weight)
        or os.environ.get(ENV, "1") == "0"
        or any(paired_weights(*pair) is None for pair in pairs)
    ):
        return prepacked.TORCH_ROUTES
    layer = pairs[0][0]
    key = (layer.input_linearity.in_features, layer.dim, layer.projection_dim, len(pairs), torch.get_num_threads())
    anew = _MEASURE_ANEW[0] is not None
    if key not in _ROUTES or anew:
        cache_key = route_cache.machine_key(key, ROUTE_METHOD)
        kept = None if anew else route_cache.read(cache_key)
        if kept is not None:
            routes, measured = kept
            measured = {**measured, "source": "kept: routes.json in the kernel folder"}
        else:
            routes, measured = measure_routes(pairs)
            if _MEASURE_ANEW[0] is not False:
                route_cache.write(cache_key, routes, measured)
            measured = {**measured, "source": "measured in this process"}
        if routes == prepacked.TORCH_ROUTES:
            for pair in pairs:  # packed for the measurement only: a copy of the weights not to keep
                prepacked.forget(pair[0])
        _ROUTES[key] = (routes, {"shape": dict(zip(("input", "dim", "projection", "layers", "threads"), key)), **measured})
    return _ROUTES[key][0]


def measure_routes(pairs: Sequence[Tuple[LSTMPLayer, LSTMPLayer]]) -> Tuple[prepacked.Routes, Dict[str, Any]]:
    """Both routes timed per regime on these pairs' weights; RETURNS the routes and what was measured."""
    chosen, measured = {}, {}
    for regime, rows in ROUTE_ROWS.items():
        torch_us, onednn_us = time_routes(pairs, rows, ROUTE_INPUT_ROWS if rows > 1 else 0)
        faster = slower(onednn_us, torch_us, ROUTE_MARGIN)  # torch's slower than oneDNN's
        speeds = sorted(t / o for t, o in zip(torch_us, onednn_us))
        chosen[regime] = prepacked.ONEDNN if faster else prepacked.TORCH
        measured[regime] = {
            "rows": rows,
            "input_rows": ROUTE_INPUT_ROWS if rows > 1 else 0,
            "torch_us_best": min(torch_us),
            "onednn_us_best": min(onednn_us),
            "onednn_speedup_median": statistics.median(speeds),
            "route": chosen[regime],
        }
    return prepacked.Routes(**chosen), measured


def chosen_routes() -> List[Dict[str, Any]]:
    """What ``choose_routes`` measured and chose in this process, per model shape (the run record's)."""
    return [measured for _, measured in _ROUTES.values()]


def time_routes(pairs: Sequence[Tuple[LSTMPLayer, LSTMPLayer]], rows: int, input_rows: int) -> Tuple[List[float], List[float]]:
    """``route_products`` in both routes, ``ROUNDS`` rounds, each timing both (the first alternating).

    RETURNS (Tuple[List[float], List[float]]): the rounds' microseconds of each, torch's first.
    """
    products = route_products(pairs, rows, input_rows)
    names = [prepacked.TORCH, prepacked.ONEDNN]
    times: Dict[str, List[float]] = {name: [] for name in names}
    with torch.no_grad():
        for name in names:
            products[name]()  # warm-up: the weights are packed on first use
        for r in range(ROUNDS):
            for name in names if r % 2 == 0 else names[::-1]:
                start = time.perf_counter()
                products[name]()
                times[name].append((time.perf_counter() - start) * 1e6)
    return times[prepacked.TORCH], times[prepacked.ONEDNN]


def route_products(
    pairs: Sequence[Tuple[LSTMPLayer, LSTMPLayer]], rows: int, input_rows: int
) -> Dict[str, Callable[[], None]]:
    """One timestep's recurrent products and projections of ``rows`` rows on paired layer pairs, and
    the first pair's input products of ``input_rows`` positions (none for 0), as the lockstep pair
    computes them on each route, on random inputs.
    RETURNS (Dict[str, Callable[[], None]]): per route, a function that runs them once."""
    paired = [paired_weights(*pair) for pair in pairs]
    packs = [prepacked.pair_packs(pair) for pair in pairs]
    width, proj, gates = paired[0][0].shape[1], paired[0][1].shape[1], paired[0][1].shape[2]
    x, h, hidden = torch.randn(2, input_rows, width), torch.randn(2, rows, proj), torch.randn(2, rows, gates // 4)
    p, out_gates, out = torch.randn(2, rows, gates), torch.empty(2, rows, gates), torch.empty(2, rows, proj)
    bias = torch.stack([layer.input_linearity.bias.detach() for layer in pairs[0]])[:, None]

    def torch_route() -> None:
        if input_rows:
            torch.bmm(x, paired[0][0]).add_(bias)
        for weights in paired:
            torch.baddbmm(p, h, weights[1], out=out_gates)
            torch.bmm(hidden, weights[2], out=out)

    def onednn_route() -> None:
        for d in range(2 if input_rows else 0):
            prepacked.product(x[d], packs[0].inputs[d], packs[0].input_biases[d])
        for pack in packs:
            for d in range(2):
                prepacked.product(h[d], pack.state[d], add=p[d])
                out[d].copy_(prepacked.product(hidden[d], pack.projection[d]))

    return {prepacked.TORCH: torch_route, prepacked.ONEDNN: onednn_route}
