"""biLM inference throughput against the straightforward baseline and against the hardware limits.

    python -m bench.bench_bilm --shapes full small --threads 2 --json results/bench/CPU/bilm.json \
        --markdown results/bench/CPU/bilm.md
    python -m bench.bench_bilm --quick      # tiny model, seconds (the smoke test runs this)

For each shape: random weights are written in the published format and read back; the
baseline (bench/baseline.py), our default forward, our optimized fp32 forward and the fast
modes all run on the same sentences in the same process, interleaved, best of --repeats.
Workloads: "batch" is one forward pass over --sentences sentences of 20-30 tokens; "single"
runs --single of them one at a time. Also measured here: GEMM peak (torch.mm); the rate torch's
one-row products reach on the model's own recurrent weights (a reference rate, not a hardware
bound); and, before and after the run, the memory bandwidth (STREAM-like triad, bench/bandwidth.py),
the cache sizes and the load average. For one sentence at a time, bytes of recurrent weights per
timestep / triad bandwidth is a floor on the time only where those weights do not fit in cache:
each shape's record says which ("weights_regime").
"""
import argparse
import copy
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

import numpy as np
import torch

from spacy_elmo.bilm import BiLM, BiLMConfig
from spacy_elmo.fast import compiled, dispatch, in_place
from spacy_elmo.fast.lockstep import paired_weights
from spacy_elmo.fast import optimize_for_inference
from spacy_elmo.fast.precision import cpu_has_bf16
from spacy_elmo.records.provenance import data_record, mark_start, provenance

from .baseline import BaselineBiLM
from .hardware import GemmBound, MatvecRate, gemm_peak, matvec_rate, memory_record, weights_regime
from .report import FAST_MODE_NAMES as FAST_MODES
from .report import markdown_tables
from .workloads import (
    PUBLISHED_NAMES,
    add_data_options,
    bench_command,
    benchmark_sentences,
    char_batch,
    cosines,
    data_file,
    display_path,
    flops_per_position,
    work_done,
    frequent_tokens,
    published_bilm,
    recurrent_bytes_per_step,
    resolve_data_options,
    shapes_model, write_report,
)

EQUAL_ATOL = 1e-4


def main(argv: Optional[List[str]] = None) -> Dict:
    args = parse_args(argv)
    report: Dict = {"command": bench_command("bench.bench_bilm", argv), "provenance": {}}  # filled in when the data are known
    mark_start(report["command"])
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    started = time.time()
    report["machine"] = machine_info(args.threads)
    if args.note:
        report["note"] = args.note
    # the memory bandwidth and load before the run, and again after it: how much the machine moved
    report["memory"] = {"before": memory_record([1, args.threads], repeats=3 if args.quick else 10)}
    gemm_shapes = [(256, 256, 256)] if args.quick else [(2048, 2048, 2048), (1024, 512, 16384), (4096, 512, 2048)]
    report["gemm"] = gemm_peak(gemm_shapes)
    # The interleaved GEMM bound uses the shape that did best here.
    args.gemm_shape = max(gemm_shapes, key=lambda shape: report["gemm"]["x".join(map(str, shape))])
    report["gemm_shape"] = list(args.gemm_shape)
    args.gemm_route = max(report["gemm"]["routes"]["x".join(map(str, args.gemm_shape))].items(), key=lambda item: item[1])[0]
    sentences, source = benchmark_sentences(args.sentences, args.test_data)
    report["sentences"] = {"source": source, "count": len(sentences), "tokens": sum(map(len, sentences))}
    vocab, vocab_source = [], ""
    read = [data_file(args.test_data, "test")]
    if args.cache_size and not args.quick:
        vocab = frequent_tokens(args.cache_size, args.train_data)
        read.append(data_file(args.train_data, "train"))
        vocab_source = f"the most frequent tokens of {display_path(data_file(args.train_data, 'train'))}"
    if not vocab and args.cache_size:
        vocab_source = "every other distinct token of the benchmark sentences"
        # A smoke run: half the benchmark's own tokens, so hits and misses both occur.
        distinct = sorted({t for s in sentences for t in s})
        vocab = distinct[::2]
    report["cache"] = {"size": args.cache_size, "vocab_tokens": len(vocab), "vocab_source": vocab_source}
    report["shapes"] = {}
    args.memory = report["memory"]["before"]
    with tempfile.TemporaryDirectory() as tmp:
        for shape in args.shapes:
            log(f"{shape}:")
            report["shapes"][shape] = bench_shape(shape, Path(tmp), sentences, vocab, args)
    report["provenance"] = provenance(**shapes_model(args.shapes), data=data_record(read))
    report["memory"]["after"] = memory_record([1, args.threads], repeats=3 if args.quick else 10)
    report["load_average"] = {"before": report["memory"]["before"]["load_average"],
                              "after": report["memory"]["after"]["load_average"]}
    report["seconds"] = time.time() - started
    text = markdown_tables(report)
    print(text)
    write_report(report, text, args.json, args.markdown)
    return report


def parse_args(argv: Optional[List[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shapes", nargs="+", default=["full", "small"], choices=sorted(PUBLISHED_NAMES))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--sentences", type=int, default=64, help="sentences in the batch workload")
    parser.add_argument("--single", type=int, default=8, help="of those, how many run one at a time")
    parser.add_argument("--cache-size", type=int, default=20000, help="char-CNN cache entries (0: none)")
    parser.add_argument("--modes", nargs="*", default=None, choices=FAST_MODES, help="default: fp16 int8, and bf16 "
                        "where the CPU has bf16 arithmetic")
    parser.add_argument("--torch-cells", action="store_true",
                        help="also time each of --modes with its in-place loop's cells in torch operations (MODE_torch_cells)")
    parser.add_argument("--json", default=None)
    parser.add_argument("--markdown", default=None)
    parser.add_argument("--quick", action="store_true", help="tiny model, few sentences: a smoke run")
    parser.add_argument("--note", default=None, help="a sentence kept in the record (e.g. why repeats were reduced)")
    add_data_options(parser, test=True, train=True)
    args = resolve_data_options(parser.parse_args(argv))
    if args.modes is None:
        args.modes = list(FAST_MODES) if _has_bf16() else [m for m in FAST_MODES if m != "bf16"]
    if args.quick:
        args.shapes, args.repeats, args.sentences, args.single = ["tiny"], 1, 8, 2
        args.cache_size = min(args.cache_size, 500)
    return args


def _cpu_flags() -> List[str]:
    cpuinfo = Path("/proc/cpuinfo")
    if not cpuinfo.is_file():
        return []
    line = next((line for line in cpuinfo.read_text().splitlines() if line.startswith("flags")), "")
    return line.split(":", 1)[-1].split()


def _has_bf16() -> bool:
    # bf16 is only fast with bf16 arithmetic in hardware; without it a full-model batch takes minutes
    return torch.cuda.is_available() or cpu_has_bf16()


def machine_info(threads: int) -> Dict:
    flags = _cpu_flags()
    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "threads": threads,
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "cpu_flags": sorted(f for f in flags if f.startswith(("avx", "amx", "fma"))),
        "quantized_engine": torch.backends.quantized.engine,
        "cuda": torch.cuda.is_available(),
        # whether the optimized fp32 path ran its timestep loop compiled (bilm/inference/compiled.py)
        "compiled_step": compiled.compiled_step() is not None,
    }


def bench_shape(shape: str, workdir: Path, sentences, vocab, args) -> Dict:
    plain = published_bilm(shape, workdir)
    config = plain.config
    models, optimized = shape_models(plain, vocab, args)
    batch = char_batch(sentences, config.max_characters_per_token)
    singles = [char_batch([s], config.max_characters_per_token) for s in sentences[: args.single]]
    flops = flops_per_position(config)
    result: Dict = {"published_name": PUBLISHED_NAMES[shape], "config": config.to_options()}
    result["flops_per_position"] = flops
    # Short best-case measurements, for reference; the bounds used for the ratios run interleaved below.
    result["matvec"] = matvec_rate(
        [(config.projection_dim, 4 * config.dim)] * (2 * config.n_layers)
        + [(config.dim, config.projection_dim)] * (2 * config.n_layers)
    )
    recurrent = recurrent_weights(optimized)
    for name, runs in (("batch", [batch]), ("single", singles)):
        positions = sum(int(lengths.sum()) for _, lengths in runs)
        if name == "batch":
            bound: Callable[[], float] = GemmBound(positions * flops["total"], shape=args.gemm_shape, route=args.gemm_route)
        else:
            bound = MatvecRate(recurrent, positions)
        entry = run_workload(models, runs, args.repeats, bound)
        # the bound counts every position through the whole model; the optimized modes do less
        entry["work"] = work_done(config, runs, vocab)
        add_bound_fractions(entry, name, positions, config)
        if name == "single":
            add_triad_floor(entry, config, args.memory, args.threads)
        result[name] = entry
    result["char_cache"] = optimized.runner.char_cache.stats() if optimized.runner.char_cache else None
    return result


def shape_models(plain: BiLM, vocab, args) -> Tuple[Dict[str, Callable], BiLM]:
    """The models to time, by name (baseline, ours, ours_opt and the fast modes), and the optimized one."""
    models: Dict[str, Callable] = {}
    baseline = BaselineBiLM(plain).eval()
    models["baseline"] = lambda ids, lengths: baseline(ids, lengths)
    models["ours"] = lambda ids, lengths: plain(ids, lengths).layers
    # Same weights, re-laid out and with the char cache: a copy, so "ours" keeps the default layout.
    optimized = optimize_for_inference(copy.deepcopy(plain), char_cache_size=args.cache_size, vocab=vocab or None)
    models["ours_opt"] = lambda ids, lengths: optimized(ids, lengths).layers
    if compiled.compiled_step() is not None:  # the same model with the timestep loop in Python
        models["ours_opt_pystep"] = lambda ids, lengths: python_step_forward(optimized, ids, lengths)
    for mode in args.modes:
        # Shares the optimized model's parameters; only the linear layers' wrappers are new.
        twin = copy.deepcopy(optimized, memo={id(p): p for p in optimized.parameters()})
        optimize_for_inference(twin, precision=mode, char_cache_size=args.cache_size, vocab=vocab or None)
        models[mode] = (lambda m: lambda ids, lengths: m(ids, lengths).layers)(twin)
        if args.torch_cells:  # the same mode with its loop's cells in torch operations
            models[f"{mode}_torch_cells"] = (lambda m: lambda ids, lengths: torch_cells_forward(m, ids, lengths))(twin)
    return models, optimized


def torch_cells_forward(bilm: BiLM, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    with in_place.torch_cells():
        return bilm(ids, lengths).layers


def python_step_forward(bilm: BiLM, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    with dispatch.python_step():
        return bilm(ids, lengths).layers


def recurrent_weights(optimized: BiLM) -> List[List[torch.Tensor]]:
    """The recurrent weight matrices a single-sentence step reads: each direction's own, and the
    paired ones where the directions run in lockstep."""
    layers = list(zip(optimized.forward_lstm.layers, optimized.backward_lstm.layers))
    separate = [
        w.t() for pair in layers for layer in pair for w in (layer.state_linearity.weight, layer.projection.weight)
    ]
    stacked = [w for pair in layers for w in (paired_weights(*pair) or ())[1:]]  # recurrent only
    return [separate, stacked] if stacked else [separate]


def add_bound_fractions(entry: Dict, name: str, positions: int, config: BiLMConfig) -> None:
    """Add to each mode of a workload's entry its rates and its fractions of the hardware bound."""
    flops = flops_per_position(config)
    bound_seconds = entry["bound_seconds"]
    work = entry["work"]
    for mode_name, stats in entry["modes"].items():
        seconds = stats["seconds"]
        stats["gflops_nominal"] = positions * flops["total"] / seconds / 1e9
        stats["recurrent_gb_per_s"] = positions * recurrent_bytes_per_step(config) / seconds / 1e9
        # Fractions of the hardware limit: the time the limit allows over the time taken.
        paired = sorted(stats.pop("paired_bound_ratios"))
        scale = flops["lstm"] / flops["total"] if name == "batch" else 1.0
        # the fraction below (the LSTM-only one for the batch) per repeat: min, median, max
        stats["pct_bound_paired"] = [100 * scale * paired[i] for i in (0, len(paired) // 2, -1)]
        if name == "batch":
            stats["pct_gemm_bound"] = 100 * bound_seconds / seconds
            stats["pct_gemm_bound_lstm_only"] = 100 * bound_seconds * flops["lstm"] / flops["total"] / seconds
            if mode_name not in ("baseline", "ours"):
                # the same bound for the FLOPs this mode actually does (caches and shared rows left out)
                stats["pct_gemm_bound_work_done"] = 100 * bound_seconds * work["done_flops"] / work["nominal_flops"] / seconds
        else:
            # torch's one-row products on the same weights, timed alone: a reference rate, not a hardware bound
            stats["pct_matvec_rate"] = 100 * bound_seconds / seconds
    if name == "batch":
        entry["gemm_gflops"] = positions * flops["total"] / bound_seconds / 1e9
    else:
        entry["matvec_rate_gb_per_s"] = positions * recurrent_bytes_per_step(config) / bound_seconds / 1e9


def add_triad_floor(entry: Dict, config: BiLMConfig, memory: Dict, threads: int) -> None:
    """One sentence at a time: each timestep reads every recurrent weight. Against the triad bandwidth
    measured before the run (best), those fp32 bytes give a floor on the time, which holds only where
    they do not fit in cache (``weights_regime`` "memory"). Each mode's share of that floor, and the regime."""
    step_bytes = recurrent_bytes_per_step(config)
    triad = memory["triad_gb_per_s"][str(threads)]["best"]
    floor_seconds = entry["positions"] * step_bytes / (triad * 1e9)
    entry["triad_floor"] = {
        "bytes_per_step": step_bytes,
        "triad_gb_per_s": triad,
        "seconds": floor_seconds,
        "weights_regime": weights_regime(step_bytes, memory["caches"], threads),
    }
    for stats in entry["modes"].values():
        stats["pct_triad_floor"] = 100 * floor_seconds / stats["seconds"]


def run_workload(models: Dict[str, Callable], runs, repeats: int, bound: Callable[[], float]) -> Dict:
    """Time every model (and the hardware bound) on ``runs``, interleaved; best of ``repeats``."""
    outputs: Dict[str, List[torch.Tensor]] = {}
    times: Dict[str, List[float]] = {name: [] for name in models}
    bound_times: List[float] = []
    with torch.no_grad():
        for name, model in models.items():  # warm-up, and the outputs to compare
            start = time.perf_counter()
            outputs[name] = [model(ids, lengths) for ids, lengths in runs]
            log(f"  [{len(runs)} run(s)] warm-up: {name} {time.perf_counter() - start:.2f} s")
        bound()
        for repeat in range(repeats):
            for name, model in models.items():
                start = time.perf_counter()
                for ids, lengths in runs:
                    model(ids, lengths)
                times[name].append(time.perf_counter() - start)
                log(f"  [{len(runs)} run(s)] repeat {repeat}: {name} {times[name][-1]:.2f} s")
            bound_times.append(bound())
            log(f"  [{len(runs)} run(s)] repeat {repeat}: hardware bound {bound_times[-1]:.2f} s")
    tokens = sum(int(lengths.sum()) - 2 * len(lengths) for _, lengths in runs)
    positions = sum(int(lengths.sum()) for _, lengths in runs)
    entry: Dict = {
        "passes": len(runs),
        "tokens": tokens,
        "positions": positions,
        "bound_seconds": min(bound_times),
        "modes": {},
    }
    for name in models:
        best = min(times[name])
        stats = {
            "seconds": best,
            "median_seconds": float(np.median(times[name])),
            "tokens_per_s": tokens / best,
            "speedup_vs_baseline": min(times["baseline"]) / best,
            # each repeat's hardware bound over this model's time in the same repeat: the spread shows
            # how much the machine moved during the run
            "paired_bound_ratios": [b / t for b, t in zip(bound_times, times[name])],
        }
        stats.update(compare(outputs["ours"], outputs[name], runs))
        if name != "baseline":
            stats["max_abs_diff_vs_baseline"] = max_abs_diff(outputs["baseline"], outputs[name], runs)
        entry["modes"][name] = stats
    return entry


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def compare(reference: List[torch.Tensor], other: List[torch.Tensor], runs) -> Dict[str, float]:
    """Cosine of each token vector (every layer) to our float32 output."""
    cos: List[np.ndarray] = []
    for ref, out, (_, lengths) in zip(reference, other, runs):
        for row, n in enumerate(lengths.tolist()):
            cos.append(cosines(ref[:, row, :n].float().numpy(), out[:, row, :n].float().numpy()).ravel())
    values = np.concatenate(cos)
    return {"cosine_mean": float(values.mean()), "cosine_min": float(values.min())}


def max_abs_diff(reference: List[torch.Tensor], other: List[torch.Tensor], runs) -> float:
    worst = 0.0
    for ref, out, (_, lengths) in zip(reference, other, runs):
        for row, n in enumerate(lengths.tolist()):
            worst = max(worst, float((ref[:, row, :n] - out[:, row, :n]).abs().max()))
    return worst


if __name__ == "__main__":
    main()
