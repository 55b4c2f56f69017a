"""Each kernel variant this CPU runs, on the shipped model: tokens/s one sentence at a time and in a
batch, against the portable variant in the same round.

    python -m bench.bench_kernel_variants --sentences 24 --rounds 21 --threads 1 \
        --json results/bench/MACHINE/kernel-variants.json --markdown results/bench/MACHINE/kernel-variants.md
    python -m bench.bench_kernel_variants --quick    # tiny random model, seconds

The variants are the kernel library's builds for each instruction set (``spacy_elmo/fast/
kernel_variants.py``), all loaded in this one process (each has its own op namespace) and taken in
turn with ``kernel_library.using``; "Python loop" is the optimized path without the compiled loop
(``python_step``). One fp32 model (``optimize_for_inference``, char cache on: after the warm-up
pass every token's encoding is cached, so the timesteps are what differ). In every round each mode
runs the one-sentence pass (every sentence alone) and the batch pass (all sentences, ``--batch`` at
a time), the order of the modes rotated between rounds; each mode's ratio to portable is taken
within its round (portable's time over its own), and the median and range of those ratios are
reported, by this process's CPU time (on a machine shared with other jobs, the wall clock also
counts the time they held the core) and by the wall clock, with each mode's largest difference
from the Python loop's outputs.
"""
import argparse
import copy
import json
import os
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional

import numpy as np
import torch

from spacy_elmo.bilm import BiLM
from spacy_elmo.fast import kernel_build, kernel_library, kernel_variants, optimize_for_inference, python_step
from spacy_elmo.io.loading import load_bilm
from spacy_elmo.records.provenance import data_record, mark_start, model_record, provenance

from .bandwidth import cpu_record
from .workloads import SAMPLE_EWT, SHAPES, bench_command, benchmark_sentences, char_batch

PYTHON_LOOP = "Python loop"
BASELINE = "portable"
CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}


def main(argv: Optional[List[str]] = None) -> Dict:
    args = parse_args(argv)
    command = bench_command("bench.bench_kernel_variants", argv)
    mark_start(command)
    torch.set_num_threads(args.threads)
    started = time.time()
    variants = kernel_variants.runnable()
    errors = kernel_library.build_variants(variants)
    failed = {name: error for name, error in errors.items() if error}
    if failed:
        raise SystemExit(f"could not build the kernel variants {', '.join(failed)}: {next(iter(failed.values()))}")
    plain = model(args.quick)
    bilm = optimize_for_inference(copy.deepcopy(plain))
    sentences, source = benchmark_sentences(args.sentences, args.test_data, min_len=5 if args.quick else 20)
    chars = plain.config.max_characters_per_token
    singles = [char_batch([s], chars) for s in sentences]
    batches = [char_batch(sentences[i: i + args.batch], chars) for i in range(0, len(sentences), args.batch)]
    modes: Dict[str, Callable] = {PYTHON_LOOP: python_step, **{v.name: _pinned(v.name) for v in variants}}
    result = run_rounds(bilm, modes, {"one sentence": singles, "batch": batches}, args.rounds)
    report = {
        "command": command,
        "machine": {**cpu_record(), "threads": args.threads, "torch": torch.__version__,
                    "kernel_variant_chosen": kernel_library.variant_record(),
                    "variants": kernel_variants.described(),
                    "compiler": (kernel_build.compiler_version().splitlines() or ["none"])[0],
                    "load_average_before": result.pop("load_before")},
        "model": "tiny (random weights)" if args.quick else "en_small (shipped)",
        "sentences": {"source": source, "count": len(sentences), "tokens": sum(map(len, sentences)),
                      "batch_size": args.batch},
        "char_cache": "on (filled by the warm-up pass)",
        "baseline": BASELINE,
        **result,
    }
    report["provenance"] = provenance(
        model=None if args.quick else model_record(),
        model_note="random weights of the tiny shape (torch seed 0)" if args.quick else None,
        data=data_record([args.test_data]))
    report["seconds"] = time.time() - started
    print(markdown(report))
    for path, write in ((args.json, lambda r: json.dumps(r, indent=2)), (args.markdown, markdown)):
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(write(report), encoding="utf-8")
    return report


def model(quick: bool) -> BiLM:
    """The shipped en_small (plain), or for ``quick`` the tiny shape with random weights."""
    if not quick:
        return load_bilm(optimize=False)
    torch.manual_seed(0)
    return BiLM(SHAPES["tiny"]).eval()


def _pinned(name: str) -> Callable:
    return lambda: kernel_library.using(name)


def run_rounds(bilm: BiLM, modes: Dict[str, Callable], workloads: Dict[str, List], rounds: int) -> Dict:
    """Every mode over every workload per round, the modes' order rotated between rounds, timed by
    the wall clock and by this process's CPU time (one torch thread: the CPU time leaves out the
    time other jobs held the core, which the wall clock counts)."""
    names = list(modes)
    times = {clock: {w: {name: [] for name in names} for w in workloads} for clock in CLOCKS}
    outputs: Dict[str, List[torch.Tensor]] = {}
    load_before = list(os.getloadavg())
    loads = []
    with torch.no_grad():
        for name in names:  # warm-up: the char cache, packing, loading; and the outputs to compare
            with modes[name]():
                outputs[name] = [bilm(ids, lengths).layers for ids, lengths in workloads["one sentence"]]
        for r in range(rounds):
            for name in names[r % len(names):] + names[: r % len(names)]:
                with modes[name]():
                    for workload, runs in workloads.items():
                        start = {clock: read() for clock, read in CLOCKS.items()}
                        for ids, lengths in runs:
                            bilm(ids, lengths)
                        for clock, read in CLOCKS.items():
                            times[clock][workload][name].append(read() - start[clock])
            loads.append(list(os.getloadavg()))
    tokens = sum(int(lengths.sum()) - 2 for _, lengths in workloads["one sentence"])
    results = {clock: {w: {name: stats(seconds, by_mode[BASELINE], tokens) for name, seconds in by_mode.items()}
                       for w, by_mode in by_workload.items()} for clock, by_workload in times.items()}
    differences = {name: max(float((a - b).abs().max()) for a, b in zip(outputs[name], outputs[PYTHON_LOOP]))
                   for name in names}
    return {"tokens": tokens, "rounds": rounds, "load_before": load_before, "load_average_per_round": loads,
            "results": results, "max_abs_difference_from_python_loop": differences}


def stats(seconds: List[float], baseline: List[float], tokens: int) -> Dict:
    """A mode's rounds: tokens/s (median, range) and its ratio to the baseline within each round."""
    ratios = [b / s for b, s in zip(baseline, seconds)]  # this round's portable time over this one's
    return {"round_seconds": seconds, "tokens_per_s_median": tokens / float(np.median(seconds)),
            "tokens_per_s_range": [tokens / max(seconds), tokens / min(seconds)],
            "x_portable_per_round": ratios, "x_portable_median": float(np.median(ratios)),
            "x_portable_range": [min(ratios), max(ratios)]}


def markdown(report: Dict) -> str:
    machine = report["machine"]
    lines = [
        f"# Kernel variants, {report['model']}: {report['sentences']['count']} sentences, {report['tokens']} tokens",
        "",
        f"CPU: {machine['model']} ({machine['cpu_count']} CPUs, torch capability {machine['torch_cpu_capability']}); "
        f"{machine['threads']} threads; variants this CPU runs: "
        f"{', '.join(n for n, s in machine['variants'].items() if s == 'runs')} (chosen: {machine['kernel_variant_chosen']}). "
        f"{report['rounds']} rounds, interleaved; load average before {machine['load_average_before'][0]:.1f}, per round "
        f"{', '.join(f'{l[0]:.1f}' for l in report['load_average_per_round'])}: compare modes within this run only. "
        "CPU: this process's CPU time; wall: the wall clock.",
        "",
        "| workload | mode | tokens/s, CPU: median (range) | x portable, CPU: median (range) "
        "| x portable, wall: median (range) | max difference from the Python loop |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for workload, rows in report["results"]["cpu"].items():
        for name, row in rows.items():
            wall = report["results"]["wall"][workload][name]
            low, high = row["tokens_per_s_range"]
            lines.append(f"| {workload} | {name} | {row['tokens_per_s_median']:.1f} ({low:.1f}-{high:.1f}) "
                         f"| {ratio(row)} | {ratio(wall)} | {report['max_abs_difference_from_python_loop'][name]:.1e} |")
    return "\n".join(lines) + "\n"


def ratio(row: Dict) -> str:
    lo, hi = row["x_portable_range"]
    return f"{row['x_portable_median']:.2f} ({lo:.2f}-{hi:.2f})"


def parse_args(argv: Optional[List[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sentences", type=int, default=24, help="sentences of 20-30 tokens (--quick: 5-30)")
    parser.add_argument("--batch", type=int, default=8, help="sentences per batch in the batch pass")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1: steadier beside other jobs)")
    parser.add_argument("--quick", action="store_true", help="the tiny shape, random weights, 4 sentences, 2 rounds")
    parser.add_argument("--test-data", type=Path, default=SAMPLE_EWT / "test.conllu", metavar="CONLLU",
                        help="the sentences (default: the shipped sample of EWT's test set)")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--markdown", type=Path, default=None)
    args = parser.parse_args(argv)
    quick = {"sentences": 4, "rounds": 2} if args.quick else {}
    for name, most in quick.items():
        setattr(args, name, min(getattr(args, name), most))
    return args


if __name__ == "__main__":
    main()
