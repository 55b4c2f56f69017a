"""Our default path beside bilm-tf's graph on TensorFlow (simple-elmo 0.9.2), in one run, interleaved.

    python -m bench.bench_tf_peer --tf-python TF_VENV/bin/python \\
        --json results/bench/CPU/tf-peer.json --markdown results/bench/CPU/tf-peer.md
    python -m bench.bench_tf_peer --tf-python TF_VENV/bin/python --quick   # tiny model, seconds

The sentences are UD EWT test's (``--test-data``, default: the project's assets, docs/datasets.md);
where those are not fetched, ``--test-data sample/ewt/train.conllu`` (the shipped sample: its test
part holds too few sentences of 20-30 tokens for a batch of 64).

The peer runs in TensorFlow's own environment (``--tf-python``: a Python with tensorflow-cpu 2.21.0,
simple-elmo 0.9.2, tf-keras 2.21.0, smart-open and h5py; docs/speed.md says how to make one), as a
second process (``bench/tf_peer.py``, with ``TF_USE_LEGACY_KERAS=1``) that times its own calls on
request, so that the two never run at once. Both run the same model: the published shape
(``--shape full``: 2x4096_512_2048cnn_2xhighway) with random weights (torch seed 0), written in the
published format (options.json + HDF5) that both read; the record gives the largest difference of
their layers on the batch (the same computation: float32 rounding apart).

Modes: "ours fp32" (``optimize_for_inference``'s default, which chose the fp32 products' routes on
this machine: the record's ``provenance.fp32_routes``), "ours bf16" (precision "bf16", where the CPU
has bf16 arithmetic), "ours int8" (precision "int8", where its kernel, ``int8_rows``, is built) and
"tensorflow fp32" (bilm-tf's graph; its LSTM state is set to zero before
every call, outside the timed span: the graph is stateful). No char cache: every call encodes its
tokens, as the peer does. Workloads: a batch of ``--batch`` sentences of 20-30 tokens (UD EWT
test) in one call, and the first ``--single`` of them one sentence a call. Each round runs every
mode on both workloads, the order rotated between rounds; the ratios are taken round by round
(our tokens/s over TensorFlow's in the same round), reported as median and range.

The roofline: in the same run, each float32 product of the model's batch (LSTM input, recurrent and
cell-projection products, highways, token projection; at the workload's rows) is timed on every route
this machine has (``bench/hardware.py``: torch's and oneDNN's), the best route counting, in
bfloat16 (torch's ``linear``) and in int8 (``int8_rows``' kernel, GOP/s); the model's mix at those
rates gives the fp32, bf16 and int8 product rates,
against which our effective GFLOP/s (the FLOPs the optimized path does, ``workloads.work_done``, over
the time) is the roofline ratio. The rates are measured again after every round's runs, and each
round's runs are put against that round's rates: a shared machine's rates move between minutes as
much as its runs do, and a ratio of two readings minutes apart moved with them (the record gives
the median round's ratio and the range; ``rates`` holds each rate's median over the rounds,
``rates_rounds`` every round's).

The memory roof of one sentence at a time: a call reads every weight of the model at least once,
and each further timestep the recurrent and cell-projection weights of every layer and direction
again (``weight_bytes``: they do not stay in the caches: 168 MB in float32 for the published
shape). Over the rate the machine reads memory, measured in the same run (``bench/bandwidth.py``:
the best of a few passes of the read-only kernel, a sum, over a float32 buffer four times the
last-level cache, at the same threads), those bytes give the most tokens/s any implementation
reading its weights in that dtype can reach; the copy kernel's rate, which counts its writes as
STREAM does and so understates what a reader gets, is kept beside it (``copy_*``, ``of_copy_roof``); the record gives ours and TensorFlow's against it, and what three times TensorFlow's
rate would need. The read rate is measured after every round too (the best of a few passes each time),
and each round's one-sentence runs are put against that round's roof. For int8 every weight counts one byte (its convolutions and token projection stay
float32: a few percent of the bytes of a call, none of a timestep's). Defaults take about 4 minutes on a 2-core EPYC.
"""
import argparse
import copy
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch

from spacy_elmo.bilm import BiLM, BiLMConfig
from spacy_elmo.fast import int8_rows, optimize_for_inference
from spacy_elmo.fast.precision import cpu_has_bf16
from spacy_elmo.records.machine import record_path
from spacy_elmo.records.provenance import mark_start

from .bandwidth import cache_sizes, cpu_record, default_array_bytes, measure
from .hardware import best_time, product_routes
from .workloads import (
    SHAPES, add_data_options, bench_command, benchmark_sentences, char_batch, finish_random_shape_report,
    flops_per_position, published_bilm, resolve_data_options, work_done,
)

PEER = Path(__file__).resolve().parent / "tf_peer.py"
TENSORFLOW = "tensorflow fp32"
WORKLOADS = ("batch", "one sentence")


def main(argv: Optional[List[str]] = None) -> Dict:
    args = parse_args(argv)
    report: Dict = {"command": bench_command("bench.bench_tf_peer", argv)}
    mark_start(report["command"])
    torch.set_num_threads(args.threads)
    started = time.time()
    report["machine"] = {"cpu": cpu_record(), "threads": args.threads, "load_average_before": list(os.getloadavg())}
    sentences, source = benchmark_sentences(args.batch, args.test_data)
    singles = sentences[: args.single]
    report["sentences"] = {"source": source, "batch": len(sentences), "one_at_a_time": len(singles),
                           "batch_tokens": sum(map(len, sentences)), "one_at_a_time_tokens": sum(map(len, singles))}
    with tempfile.TemporaryDirectory(prefix="tf-peer-") as tmp:
        work = Path(tmp)
        plain = published_bilm(args.shape, work)
        config = plain.config
        models = {"ours fp32": plain}
        if cpu_has_bf16():
            models["ours bf16"] = optimize_for_inference(copy.deepcopy(plain), precision="bf16")
        if int8_rows.rows_op() is not None:  # int8 on its own kernel (int8_rows), where it is built
            models["ours int8"] = optimize_for_inference(copy.deepcopy(plain), precision="int8")
        optimize_for_inference(plain)
        batch = char_batch(sentences, config.max_characters_per_token)
        ones = [char_batch([sentence], config.max_characters_per_token) for sentence in singles]
        with Peer(args.tf_python, work / f"{args.shape}_options.json", work / f"{args.shape}_weights.hdf5",
                  args.threads, len(sentences), work) as peer:
            report["peer"] = peer.about
            peer.load("batch", batch[0])
            for k, (ids, _) in enumerate(ones):
                peer.load(f"one {k}", ids)
            report["peer_max_abs_diff"] = peer_difference(plain, batch, peer.layers("batch"))
            runs = {
                "batch": {**{name: ours(model, [batch]) for name, model in models.items()}, TENSORFLOW: lambda: peer.run(["batch"])},
                "one sentence": {**{name: ours(model, ones) for name, model in models.items()},
                                 TENSORFLOW: lambda: peer.run([f"one {k}" for k in range(len(ones))])},
            }
            rate_rounds: List[Dict] = []
            read_rounds: List[Dict] = []

            def machine_rates() -> None:  # after every kept round: the rates its runs are put against
                rate_rounds.append(product_rates(config, batch, args.quick))
                read_rounds.append(read_rates(args.threads, args.quick))

            seconds = interleaved(runs, args.rounds, machine_rates)
        report["rates"] = median_rates(rate_rounds)
        report["rates_rounds"] = [{k: v for k, v in rates.items() if k != "shapes"} for rates in rate_rounds]
    tokens = {"batch": report["sentences"]["batch_tokens"], "one sentence": report["sentences"]["one_at_a_time_tokens"]}
    report["results"] = summarize(seconds, tokens)
    report["roofline"] = roofline(config, [batch], seconds["batch"], rate_rounds)
    report["memory_roof"] = memory_roof(config, singles, seconds["one sentence"], read_rounds)
    report["config"] = config.to_options()
    return finish_random_shape_report(report, args, started, markdown)


class Peer:
    """bilm-tf's graph in TensorFlow's environment (``bench/tf_peer.py``), one request at a time."""

    def __init__(self, python: str, options: Path, weights: Path, threads: int, max_batch: int, work: Path) -> None:
        env = {**os.environ, "TF_USE_LEGACY_KERAS": "1", "TF_CPP_MIN_LOG_LEVEL": "2"}
        self.work = work
        self.process = subprocess.Popen(
            [python, str(PEER), str(options), str(weights), str(threads), str(max_batch)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env,
        )
        self.about = self._answer()
        if not self.about.get("ready"):
            raise RuntimeError(f"the TensorFlow peer did not start: {self.about}")

    def __enter__(self) -> "Peer":
        return self

    def __exit__(self, *exc) -> None:
        if self.process.poll() is None:
            self._ask({"quit": True}, answer=False)
            self.process.wait(timeout=60)

    def load(self, name: str, ids: torch.Tensor) -> None:
        path = self.work / f"ids-{len(list(self.work.glob('ids-*.npy')))}.npy"
        np.save(path, ids.numpy())
        self._ask({"load": name, "ids": str(path)})

    def run(self, names: Sequence[str]) -> float:
        """Seconds of one call per name, summed (the state reset before each is not counted)."""
        return sum(self._ask({"run": name})["seconds"] for name in names)

    def layers(self, name: str) -> np.ndarray:
        """The layers (3, B, T, width) of ``name``'s sentences, without the boundary tokens."""
        return np.load(self._ask({"layers": name})["written"]).transpose(1, 0, 2, 3)

    def _ask(self, request: Dict, answer: bool = True) -> Dict:
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        return self._answer() if answer else {}

    def _answer(self) -> Dict:
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"the TensorFlow peer stopped (exit status {self.process.wait()}): see its messages above")
        return json.loads(line)


def ours(model: BiLM, runs: Sequence[Tuple[torch.Tensor, torch.Tensor]]) -> Callable[[], float]:
    """A function that runs ``model`` on every (ids, lengths) of ``runs`` and gives the seconds it took."""

    def run() -> float:
        start = time.perf_counter()
        with torch.no_grad():
            for ids, lengths in runs:
                model(ids, lengths)
        return time.perf_counter() - start

    return run


def peer_difference(model: BiLM, batch: Tuple[torch.Tensor, torch.Tensor], theirs: np.ndarray) -> float:
    """The largest difference between our layers and the peer's on the batch (real tokens only)."""
    ids, lengths = batch
    with torch.no_grad():
        layers = model(ids, lengths).layers.numpy()
    return float(max(np.abs(layers[:, b, 1 : n - 1] - theirs[:, b, : n - 2]).max() for b, n in enumerate(lengths.tolist())))


def interleaved(runs: Dict[str, Dict[str, Callable[[], float]]], rounds: int,
                after_round: Optional[Callable[[], None]] = None) -> Dict[str, Dict[str, List[float]]]:
    """Every mode on every workload once a round (a warm-up round first, not kept), the modes' order
    rotated between rounds; ``after_round`` called after each kept round's runs.
    RETURNS per workload and mode the rounds' seconds."""
    seconds: Dict[str, Dict[str, List[float]]] = {w: {m: [] for m in modes} for w, modes in runs.items()}
    for r in range(-1, rounds):
        for workload, modes in runs.items():
            names = list(modes)
            shift = max(r, 0) % len(names)
            for name in names[shift:] + names[:shift]:
                took = modes[name]()
                if r >= 0:
                    seconds[workload][name].append(took)
        if r >= 0 and after_round is not None:
            after_round()
        print(f"round {r + 1}/{rounds}" if r >= 0 else "warm-up done", file=sys.stderr, flush=True)
    return seconds


def summarize(seconds: Dict[str, Dict[str, List[float]]], tokens: Dict[str, int]) -> Dict:
    """Per workload and mode: tokens/s (median, min, max); and against TensorFlow, the rounds' ratios
    of tokens/s (median, min, max)."""
    result: Dict = {}
    for workload, modes in seconds.items():
        entry: Dict = {}
        for name, times in modes.items():
            rates = [tokens[workload] / t for t in times]
            entry[name] = {"tokens_per_s": statistics.median(rates), "tokens_per_s_min": min(rates),
                           "tokens_per_s_max": max(rates), "rounds": len(rates)}
            if name != TENSORFLOW:
                ratios = sorted(peer / t for t, peer in zip(times, modes[TENSORFLOW]))
                entry[name].update(vs_tensorflow=statistics.median(ratios), vs_tensorflow_min=ratios[0],
                                   vs_tensorflow_max=ratios[-1])
        result[workload] = entry
    return result


def model_products(config: BiLMConfig, positions: int, distinct: int, rows: int) -> List[Tuple[int, int, int, int]]:
    """The float32 products of a batch as (rows, in, out, count): per layer and direction the input
    products over every position and the recurrent and cell projections over ``rows`` rows a timestep
    (``positions`` rows in all), and the token encoder's highways and projection over the distinct tokens."""
    d, p, f = config.dim, config.projection_dim, config.n_filters
    lstm = 2 * config.n_layers
    return [
        (positions, p, 4 * d, lstm), (rows, p, 4 * d, lstm), (rows, d, p, lstm),
        (distinct, f, f, 2 * config.n_highway), (distinct, f, p, 1),
    ]


def product_rates(config: BiLMConfig, batch: Tuple[torch.Tensor, torch.Tensor], quick: bool) -> Dict:
    """GFLOP/s of each of the batch's product shapes on every fp32 route and in bf16, and the model's
    mix at the best fp32 route's and at bf16's rates (see the module's docstring)."""
    ids, lengths = batch
    work = work_done(config, [batch])
    shapes = model_products(config, work["positions"], work["distinct_tokens"], len(lengths))
    repeats = 1 if quick else 3
    per_shape, fp32_seconds, bf16_seconds, int8_seconds, total = {}, 0.0, 0.0, 0.0, 0.0
    for rows, width, out, count in shapes:
        flops = 2.0 * rows * width * out
        rates = {route: flops / best_time(fn, repeats) / 1e9 for route, fn in product_routes(rows, width, out).items()}
        x, weight = torch.randn(rows, width).bfloat16(), torch.randn(out, width).bfloat16()
        rates["bf16"] = flops / best_time(lambda: torch.nn.functional.linear(x, weight), repeats) / 1e9
        if int8_rows.rows_op() is not None:
            x8, packed, y8 = torch.randn(1, rows, width), int8_rows.pack(torch.randn(1, out, width)), torch.empty(1, rows, out)
            rates["int8"] = flops / best_time(lambda: int8_rows.product(x8, packed, y8), repeats) / 1e9
        best = max(rate for route, rate in rates.items() if route not in ("bf16", "int8"))
        per_shape[f"{rows}x{width}x{out}"] = {**rates, "count": count}
        fp32_seconds += count * flops / (best * 1e9)
        bf16_seconds += count * flops / (rates["bf16"] * 1e9)
        int8_seconds += count * flops / (rates["int8"] * 1e9) if "int8" in rates else 0.0
        total += count * flops
    result = {"shapes": per_shape, "fp32_gflop_per_s": total / fp32_seconds / 1e9, "bf16_gflop_per_s": total / bf16_seconds / 1e9}
    if int8_seconds:
        result["int8_gop_per_s"] = total / int8_seconds / 1e9
    return result


def median_rates(rounds: Sequence[Dict]) -> Dict:
    """Each product rate's median over the rounds' measurements (and each shape's, route by route)."""
    keys = [k for k in rounds[0] if k != "shapes"]
    result: Dict = {k: statistics.median(r[k] for r in rounds) for k in keys}
    result["shapes"] = {
        shape: {route: statistics.median(r["shapes"][shape][route] for r in rounds) for route in entry}
        for shape, entry in rounds[0]["shapes"].items()
    }
    return result


def _rate_key(name: str) -> str:
    return "bf16_gflop_per_s" if "bf16" in name else "int8_gop_per_s" if "int8" in name else "fp32_gflop_per_s"


def roofline(config: BiLMConfig, runs, seconds: Dict[str, List[float]], rate_rounds: Sequence[Dict]) -> Dict:
    """Our effective GFLOP/s on the batch (the FLOPs the optimized path does over the median time, and
    the nominal count: every position through the whole model) against the product rates: each
    round's time against the rates measured after it (``rate_rounds``, one a round), the median
    round's ratio and the range."""
    work = work_done(config, runs)
    result = {"flops_done": work["done_flops"], "flops_nominal": work["nominal_flops"],
              "flops_per_position": flops_per_position(config)["total"]}
    for name, times in seconds.items():
        if name == TENSORFLOW or _rate_key(name) not in rate_rounds[0]:
            continue
        effective = work["done_flops"] / statistics.median(times) / 1e9
        ratios = sorted(work["done_flops"] / t / 1e9 / rates[_rate_key(name)] for t, rates in zip(times, rate_rounds))
        result[name] = {"effective_gflop_per_s": effective, "of_product_rate": statistics.median(ratios),
                        "of_product_rate_min": ratios[0], "of_product_rate_max": ratios[-1],
                        "product_rate": statistics.median(rates[_rate_key(name)] for rates in rate_rounds),
                        "nominal_gflop_per_s": work["nominal_flops"] / statistics.median(times) / 1e9}
    return result


def weight_bytes(config: BiLMConfig, positions: int, itemsize: int) -> int:
    """Bytes of weight one call of ``positions`` LSTM positions reads at least: every parameter of the
    model once (token encoder, input products), and the recurrent and cell-projection weights of
    every layer and direction at each further timestep."""
    model = BiLM(config)
    step = sum(layer.state_linearity.weight.numel() + layer.projection.weight.numel()
               for stack in (model.forward_lstm, model.backward_lstm) for layer in stack.layers)
    every = sum(p.numel() for p in model.parameters())
    return itemsize * (every + step * max(positions - 1, 0))


def read_rates(threads: int, quick: bool) -> Dict:
    """The read-only and copy kernels' rates now (``bench/bandwidth.py``: float32 buffers of 4 x the
    last-level cache, at ``threads``, the best of a few passes each)."""
    elements = default_array_bytes(cache_sizes()) // 4
    return {kernel: measure(kernel, elements, threads=threads, repeats=2 if quick else 3, dtype="float32")
            for kernel in ("read", "copy")}


def memory_roof(config: BiLMConfig, singles: Sequence[Sequence[str]], seconds: Dict[str, List[float]],
                read_rounds: Sequence[Dict]) -> Dict:
    """One sentence at a time against the rate this machine reads memory (see the module's docstring):
    each round's tokens/s against the roof of the read rate measured after it (``read_rounds``, one a
    round: ``read_rates``), the median round's ratio and the range; beside it, for reference, the copy
    kernel's. The roofs given are at the rounds' median rates."""
    tokens = sum(len(s) for s in singles)
    positions = [len(s) + 2 for s in singles]  # the boundary tokens run through the LSTMs too
    roof: Dict = {"roof_kernel": "read", "step_weight_mb": {}, "modes": {}}
    for kernel in ("read", "copy"):
        rates = sorted(r[kernel]["gb_per_s_best"] for r in read_rounds)
        roof[f"{kernel}_gb_per_s"] = statistics.median(rates)
        roof[f"{kernel}_gb_per_s_min"], roof[f"{kernel}_gb_per_s_max"] = rates[0], rates[-1]
        first = read_rounds[0][kernel]
        roof[kernel] = {k: first[k] for k in ("kernel", "threads", "array_bytes", "bytes_per_pass", "check")}
        roof[kernel]["check"] = all(r[kernel]["check"] for r in read_rounds)
    read_bytes = {}
    for dtype, itemsize in (("fp32", 4), ("bf16", 2), ("int8", 1)):
        read_bytes[dtype] = sum(weight_bytes(config, n, itemsize) for n in positions)
        roof[f"roof_tokens_per_s_{dtype}"] = tokens / (read_bytes[dtype] / (roof["read_gb_per_s"] * 1e9))
        roof[f"copy_roof_tokens_per_s_{dtype}"] = tokens / (read_bytes[dtype] / (roof["copy_gb_per_s"] * 1e9))
        roof["step_weight_mb"][dtype] = (weight_bytes(config, 3, itemsize) - weight_bytes(config, 2, itemsize)) / 1e6
    for name, times in seconds.items():
        dtype = "bf16" if "bf16" in name else "int8" if "int8" in name else "fp32"
        entry: Dict = {}
        for kernel, key in (("read", "of_roof"), ("copy", "of_copy_roof")):
            # a round's tokens/s over its roof: the bytes it must read at the rate read after it
            ratios = sorted(tokens / t / (tokens / (read_bytes[dtype] / (r[kernel]["gb_per_s_best"] * 1e9)))
                            for t, r in zip(times, read_rounds))
            entry.update({key: statistics.median(ratios), f"{key}_min": ratios[0], f"{key}_max": ratios[-1]})
        roof["modes"][name] = entry
    if TENSORFLOW in seconds:
        rates = [tokens / t for t in seconds[TENSORFLOW]]
        roof["three_times_tensorflow_of_fp32_roof"] = 3 * statistics.median(rates) / roof["roof_tokens_per_s_fp32"]
    return roof


def markdown(report: Dict) -> str:
    lines = [f"# Our default path beside bilm-tf on TensorFlow: {report['shape']}", "",
             f"Command: `{report['command']}`", "",
             f"CPU: {report['machine']['cpu']['model']}, {report['machine']['threads']} threads; load "
             f"{report['machine']['load_average_before'][0]:.1f} before, {report['machine']['load_average_after'][0]:.1f} after. "
             f"Peer: TensorFlow {report['peer']['tensorflow']}, simple-elmo {report['peer']['simple_elmo']}; "
             f"largest difference of the layers on the batch: {report['peer_max_abs_diff']:.2e}. "
             f"Sentences: {report['sentences']['source']}.", "",
             "| workload | mode | tokens/s (median, range) | against TensorFlow (median, range) |", "|---|---|---:|---:|"]
    for workload, modes in report["results"].items():
        for name, entry in modes.items():
            ratio = (f"{entry['vs_tensorflow']:.2f}x ({entry['vs_tensorflow_min']:.2f}-{entry['vs_tensorflow_max']:.2f})"
                     if "vs_tensorflow" in entry else "1")
            lines.append(f"| {workload} | {name} | {entry['tokens_per_s']:,.1f} ({entry['tokens_per_s_min']:,.1f}-"
                         f"{entry['tokens_per_s_max']:,.1f}) | {ratio} |")
    rates, roof = report["rates"], report["roofline"]
    lines += ["", f"Product rates on the model's batch shapes (median of the rounds): fp32 {rates['fp32_gflop_per_s']:.1f} GFLOP/s (best route "
              f"per shape), bf16 {rates['bf16_gflop_per_s']:.1f} GFLOP/s"
              + (f", int8 {rates['int8_gop_per_s']:.1f} GOP/s (int8_rows' kernel)." if "int8_gop_per_s" in rates else ".")]
    for name, entry in roof.items():
        if isinstance(entry, dict):
            spread = (f" (rounds {100 * entry['of_product_rate_min']:.0f}-{100 * entry['of_product_rate_max']:.0f}%)"
                      if "of_product_rate_min" in entry else "")
            lines.append(f"- {name}, batch: {entry['effective_gflop_per_s']:.1f} GFLOP/s effective, "
                         f"{100 * entry['of_product_rate']:.0f}% of the product rate{spread}.")
    roof = report.get("memory_roof")
    if roof:
        lines += ["", f"One sentence at a time against memory: {roof['step_weight_mb']['fp32']:.0f} MB of fp32 weights a timestep; "
                  f"read-only rate {roof['read_gb_per_s']:.1f} GB/s"
                  + (f" (rounds {roof['read_gb_per_s_min']:.1f}-{roof['read_gb_per_s_max']:.1f})" if "read_gb_per_s_min" in roof else "")
                  + f" (copy, for reference: {roof['copy_gb_per_s']:.1f}); "
                  f"roof {roof['roof_tokens_per_s_fp32']:,.1f} tokens/s in fp32, {roof['roof_tokens_per_s_bf16']:,.1f} in bf16, "
                  f"{roof['roof_tokens_per_s_int8']:,.1f} in int8."]
        for name, entry in roof["modes"].items():
            spread = (f" (rounds {100 * entry['of_roof_min']:.0f}-{100 * entry['of_roof_max']:.0f}%)" if "of_roof_min" in entry else "")
            lines.append(f"- {name}: {100 * entry['of_roof']:.0f}% of its dtype's roof{spread} "
                         f"({100 * entry['of_copy_roof']:.0f}% of the copy kernel's).")
        if "three_times_tensorflow_of_fp32_roof" in roof:
            lines.append(f"- three times TensorFlow's rate: {100 * roof['three_times_tensorflow_of_fp32_roof']:.0f}% of the fp32 roof.")
    routes = report["provenance"]["fp32_routes"]["chosen"]
    lines += ["", "fp32 routes chosen: " + (", ".join(f"{r['shape']}: one sentence {r['one_sentence']['route']}, "
                                                       f"batch {r['batch']['route']}" for r in routes) or "none measured")]
    return "\n".join(lines) + "\n"


def parse_args(argv: Optional[List[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tf-python", required=True, help="the Python of TensorFlow's environment")
    parser.add_argument("--shape", default="full", choices=sorted(SHAPES))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--batch", type=int, default=64, help="sentences in the batch")
    parser.add_argument("--single", type=int, default=16, help="of those, how many run one at a time")
    # a part CPU of these paths is this CPU's folder (records.machine.cpu_folder: "amd-f25-m17")
    parser.add_argument("--json", type=record_path, default=None)
    parser.add_argument("--markdown", type=record_path, default=None)
    parser.add_argument("--quick", action="store_true", help="tiny model, few sentences, two rounds: a smoke run")
    add_data_options(parser, test=True)
    args = resolve_data_options(parser.parse_args(argv))
    if args.quick:
        args.shape, args.rounds, args.batch, args.single = "tiny", 2, 8, 2
    return args


if __name__ == "__main__":
    main()
