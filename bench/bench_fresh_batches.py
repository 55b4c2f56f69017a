"""Training steps on batches never seen before, as a real run meets them: oneDNN's kept kernels,
each variant in its own process, interleaved.

    python -m bench.bench_fresh_batches --text corpus/full/pretrain/train/train-01.txt \\
        --json results/bench/CPU/fresh-batches.json
    python -m bench.bench_fresh_batches --quick

``bench_pretrain_step`` times the same few batches round after round, so from its second round on
every shape of a step has its oneDNN kernel made already. A training run never repeats a batch: each
has its own count of distinct tokens (the highways' and projection's rows), of tokens of each span
(the convolutions' rows) and of running rows at each timestep, and oneDNN makes (JIT-compiles) a
kernel for every new shape, keeping the last ``ONEDNN_PRIMITIVE_CACHE_CAPACITY`` (1,024 by default).
Each child process here builds the config's shape with random weights (torch seed 0), plans its
batches from ``--text`` with training's own planner, warms up on ``--warmup`` batches and then times
``--groups`` groups of ``--per-group`` further batches, none repeated. Variants:

- ``torch cells, default cache``: the step as it was before its cells ran in the kernel library
  (``train_step.torch_cells``), oneDNN's 1,024 kept kernels;
- ``default cache``: oneDNN's 1,024 kept kernels;
- ``kept kernels``: ``training.memory.KEPT_KERNELS`` kept, as ``pretrain`` and ``finetune`` run.

(A fourth variant once padded the token encoder's rows to 8 sizes an octave, so that fewer shapes
would need kernels; with the kernels kept it was slower than exact rows, 1.06x against 1.10x the
default cache in one run: results/bench/amd-f25-m17/fresh-batches.json, whose commit has it.)

The variants alternate, the order rotated each round (the machines are shared VMs whose speed
drifts); the report gives each variant's tokens/s (median and range over its groups and rounds), its
ratio to ``default cache`` and to ``torch cells, default cache`` round by round, and each child's peak resident memory.
"""
import argparse
import contextlib
import itertools
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Dict, List, Optional

import torch

from spacy_elmo.records.provenance import data_record, mark_start, provenance
from spacy_elmo.training.memory import KEPT_KERNELS, PRIMITIVE_CACHE

from .bench_bilm import machine_info
from .workloads import bench_command, write_report

# name: (oneDNN's cache capacity, the training cells in torch operations)
VARIANTS = {
    "torch cells, default cache": (1024, True),
    "default cache": (1024, False),
    "kept kernels": (KEPT_KERNELS, False),
}


def child(args: argparse.Namespace) -> Dict:
    """One variant's timings (run in a process of its own, its cache capacity in its environment)."""
    from spacy_elmo.bilm import BiLM
    from spacy_elmo.bilm.softmax import WordSoftmax
    from spacy_elmo.training.batches import sentence_batches
    from spacy_elmo.training.lm import LanguageModel, init_for_training
    from spacy_elmo.training.memory import keep_freed_memory
    from spacy_elmo.training.vocab import Vocab

    from .bench_pretrain_step import model_shape, read_sentences, train_step

    from spacy_elmo.fast import train_step as train_step_module

    cells = train_step_module.torch_cells() if VARIANTS[args.child][1] else contextlib.nullcontext()
    torch.set_num_threads(args.threads)
    keep_freed_memory()
    config, n_samples, caps = model_shape(args)
    sentences_cap, tokens_cap = caps[0]
    sentences = read_sentences(args.text, quick=args.quick)
    if args.quick:  # enough of the quick run's sentences for a few batches
        sentences = sentences * 200
    vocab = Vocab.from_counts(Counter(t for s in sentences for t in s), size=50000, min_count=1)
    torch.manual_seed(0)
    lm = LanguageModel(init_for_training(BiLM(config)),
                       WordSoftmax(len(vocab), config.projection_dim, n_samples=min(n_samples, len(vocab))), dropout=0.1)
    lm.train()
    optimizer = torch.optim.Adam(lm.parameters(), lr=1e-4)
    needed = args.warmup + args.groups * args.per_group
    planned = sentence_batches(iter(sentences), vocab, seed=0, epoch=0, batch_size=sentences_cap, max_batch_tokens=tokens_cap,
                               buffer_size=20000, max_chars=config.max_characters_per_token)
    batches = list(itertools.islice(planned, needed))
    if len(batches) < needed:
        raise SystemExit(f"--text makes {len(batches)} batches, {needed} are needed: give a longer text")
    rates = []
    with cells:
        for batch in batches[: args.warmup]:
            train_step(lm, optimizer, batch, args.precision)
        for g in range(args.groups):
            group = batches[args.warmup + g * args.per_group : args.warmup + (g + 1) * args.per_group]
            start = time.perf_counter()
            for batch in group:
                train_step(lm, optimizer, batch, args.precision)
            rates.append(sum(b.n_targets for b in group) / (time.perf_counter() - start))
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"variant": args.child, "tokens_per_s": rates, "peak_rss_mb": peak_kb / 1024, "vocab": len(vocab),
            "cache_capacity": os.environ.get(PRIMITIVE_CACHE)}


def run_child(variant: str, argv: List[str]) -> Dict:
    env = {**os.environ, PRIMITIVE_CACHE: str(VARIANTS[variant][0])}
    done = subprocess.run([sys.executable, "-m", "bench.bench_fresh_batches", *argv, "--child", variant],
                          env=env, capture_output=True, text=True, cwd=Path(__file__).resolve().parents[1])
    if done.returncode:
        raise SystemExit(f"the {variant!r} process failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: Optional[List[str]] = None) -> Dict:
    args = parse_args(argv)
    if args.child:
        print(json.dumps(child(args)))
        return {}
    command = bench_command("bench.bench_fresh_batches", argv)
    mark_start(command)
    child_argv = [a for a in (argv if argv is not None else sys.argv[1:])]
    names = list(VARIANTS)
    runs: Dict[str, List[Dict]] = {name: [] for name in names}
    for round_ in range(args.rounds):
        for name in names[round_ % len(names):] + names[: round_ % len(names)]:
            runs[name].append(run_child(name, child_argv))
            print(f"round {round_ + 1}/{args.rounds} {name}: {[round(r) for r in runs[name][-1]['tokens_per_s']]} tok/s",
                  file=sys.stderr, flush=True)
    base = "default cache"
    rows = []
    for name in names:
        rates = [r for run in runs[name] for r in run["tokens_per_s"]]
        row = {"variant": name, "cache_capacity": VARIANTS[name][0],
               "torch_cells": VARIANTS[name][1], "tokens_per_s_median": statistics.median(rates),
               "tokens_per_s_min": min(rates), "tokens_per_s_max": max(rates),
               "peak_rss_mb_max": max(run["peak_rss_mb"] for run in runs[name])}
        for key, other in (("x_default", base), ("x_torch_cells", "torch cells, default cache")):
            ratios = [statistics.median(run["tokens_per_s"]) / statistics.median(b["tokens_per_s"]) for run, b in zip(runs[name], runs[other])]
            row.update({f"{key}_median": statistics.median(ratios), f"{key}_min": min(ratios), f"{key}_max": max(ratios)})
        rows.append(row)
    report = {
        "command": command,
        "provenance": provenance(model=None, model_note="random weights (torch seed 0) of the shape of the [model] section of the config",
                                 data=data_record([args.text] if args.text else []),
                                 data_note=None if args.text else "the quick run's sentences, written in the benchmark"),
        "machine": machine_info(args.threads), "precision": args.precision, "rounds": args.rounds,
        "warmup": args.warmup, "groups": args.groups, "per_group": args.per_group, "vocab": runs[base][0]["vocab"],
        "rows": rows, "runs": runs,
    }
    text = markdown(report)
    print(text)
    write_report(report, text, args.json, str(Path(args.json).with_suffix(".md")) if args.json else None)
    return report


def markdown(report: Dict) -> str:
    lines = [
        f"# Training steps on fresh batches: {report['provenance']['cpu']}", "", f"`{report['command']}`", "",
        f"{report['precision']}, {report['machine']['threads']} threads; each child process warms up on "
        f"{report['warmup']} batches, then times {report['groups']} groups of {report['per_group']} batches never "
        f"seen before; {report['rounds']} interleaved rounds.", "",
        "| variant | kept kernels | tokens/s (median) | range | x default cache (median) | range | x torch cells (median) | range | peak memory (MB) |",
        "|---|---:|---:|---|---:|---|---:|---|---:|",
    ]
    for r in report["rows"]:
        lines.append(f"| {r['variant']} | {r['cache_capacity']} | "
                     f"{r['tokens_per_s_median']:.0f} | {r['tokens_per_s_min']:.0f}-{r['tokens_per_s_max']:.0f} | "
                     f"{r['x_default_median']:.2f} | {r['x_default_min']:.2f}-{r['x_default_max']:.2f} | "
                     f"{r['x_torch_cells_median']:.2f} | {r['x_torch_cells_min']:.2f}-{r['x_torch_cells_max']:.2f} | {r['peak_rss_mb_max']:.0f} |")
    return "\n".join(lines) + "\n"


def parse_args(argv: Optional[List[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="configs/bilm-small.cfg")
    parser.add_argument("--shape", default=None)
    parser.add_argument("--text", default=None, help="whitespace-tokenized text, a sentence a line (long: no batch repeats)")
    parser.add_argument("--batches", default="256:6144", help="SENTENCES:TOKENS caps of a batch (the stretch's)")
    parser.add_argument("--precision", default="bf16", choices=["fp32", "bf16"])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--groups", type=int, default=4)
    parser.add_argument("--per-group", type=int, default=15)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--json", default=None)
    parser.add_argument("--quick", action="store_true", help="tiny model, few batches (a smoke run)")
    parser.add_argument("--child", default=None, choices=sorted(VARIANTS), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.quick:
        args.warmup, args.groups, args.per_group, args.rounds = 1, 1, 2, 1
    return args


if __name__ == "__main__":
    main()
