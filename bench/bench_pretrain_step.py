"""Throughput of one whole pretraining step (biLM + sampled softmax + backward + optimizer) by setting.

    python -m bench.bench_pretrain_step --text corpus/full/pretrain/dev.txt --json results/bench/CPU/pretrain-step.json
    python -m bench.bench_pretrain_step --quick

What the ``pretrain`` command runs at each step, timed for each combination of precision (fp32,
bf16 autocast), torch threads, batch caps and LSTM loop (``steps``: the one-node loop training
uses, ``fast/train_step.py``, its elementwise work in the kernel library where there is one;
``steps-torch-cells``: the same node with that work in torch operations, as before the kernels
took it, the A/B of ``--loops steps,steps-torch-cells``; ``ops``: the op-by-op autograd loop), with random weights of the config's
shape and a vocabulary counted from ``--text``. Each setting runs ``--steps`` batches a round: the
first batches the training's own length-bucketed, shuffled planner (``sentence_batches``, seed 0)
makes of the text, so the padding is what training sees. The settings are interleaved round by round (the machines are
shared VMs whose speed drifts), the first round warms up, and the report gives the median and the
spread of tokens/s per setting plus each setting's ratio to fp32 at the same threads and batch,
taken round by round. bf16 autocast only pays where the CPU has bf16 arithmetic (avx512_bf16,
amx_bf16); the machine's flags are recorded with the result.
"""
import argparse
import contextlib
import itertools
import json
import statistics
import time
from collections import Counter
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import torch
from thinc.api import Config

from spacy_elmo.bilm import BiLM, BiLMConfig
from spacy_elmo.fast import dispatch
from spacy_elmo.fast import train_step as train_step_module
from spacy_elmo.bilm.softmax import WordSoftmax
from spacy_elmo.records.provenance import data_record, mark_start, provenance
from spacy_elmo.training.batches import LMBatch, sentence_batches
from spacy_elmo.training.lm import LanguageModel, init_for_training
from spacy_elmo.training.memory import keep_freed_memory
from spacy_elmo.training.vocab import Vocab

from .bench_bilm import machine_info
from .workloads import PUBLISHED_NAMES, SHAPES, bench_command


def main(argv: Optional[List[str]] = None) -> Dict:
    args = parse_args(argv)
    command = bench_command("bench.bench_pretrain_step", argv)
    mark_start(command)
    config, n_samples, batches = model_shape(args)
    sentences = read_sentences(args.text, quick=args.quick)
    vocab = Vocab.from_counts(Counter(t for s in sentences for t in s), size=50000, min_count=1)
    keep_freed_memory()  # as pretrain and finetune run
    precisions = args.precisions.split(",")
    threads = [int(t) for t in args.threads.split(",")]
    torch.manual_seed(0)
    lm = LanguageModel(init_for_training(BiLM(config)), WordSoftmax(len(vocab), config.projection_dim, n_samples=min(n_samples, len(vocab))), dropout=0.1)
    lm.train()
    make_opt = torch.optim.Adam if args.optimizer == "adam" else torch.optim.Adagrad
    optimizer = make_opt(lm.parameters(), lr=1e-4)
    loops = args.loops.split(",")
    settings = [(p, t, b, loop) for b in batches for t in threads for p in precisions for loop in loops]
    prepared = {b: training_batches(sentences, vocab, b, args.steps, config.max_characters_per_token) for b in batches}
    seconds = time_steps(lm, optimizer, prepared, settings, args.rounds)
    report = {
        "command": command, "provenance": provenance(
            model=None, model_note="random weights (torch seed 0) of the "
            + (f"published shape {PUBLISHED_NAMES[args.shape]}" if args.shape else "tiny shape" if args.quick
               else "shape of the [model] section of the config"),
            data=data_record([args.text] if args.text else []),
            data_note=None if args.text else "the quick run's sentences, written in the benchmark",
        ), "machine": machine_info(max(threads)),
        "config": config.to_options(), "softmax_samples": n_samples, "vocab": len(vocab),
        "optimizer": args.optimizer, "rounds": args.rounds, "steps": args.steps, "rows": setting_rows(seconds, prepared, precisions),
    }
    print(markdown(report))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(report, indent=2), encoding="utf-8")
        Path(args.json).with_suffix(".md").write_text(markdown(report), encoding="utf-8")
    return report


def parse_args(argv: Optional[List[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="configs/bilm-small.cfg")
    parser.add_argument("--shape", default=None, choices=sorted(SHAPES),
                        help="time this published shape (bench/workloads.py SHAPES) instead of the config's [model]; the config still gives n_samples")
    parser.add_argument("--text", default=None, help="whitespace-tokenized text, a sentence a line")
    parser.add_argument("--precisions", default="fp32,bf16")
    parser.add_argument("--threads", default="2", help="comma-separated torch thread counts")
    parser.add_argument("--batches", default="256:6144", help="comma-separated SENTENCES:TOKENS caps")
    parser.add_argument("--loops", default="steps",
                        help="comma-separated LSTM loops: steps (one node), steps-torch-cells (its cells in torch), ops (op by op)")
    parser.add_argument("--steps", type=int, default=4, help="training batches per setting and round")
    parser.add_argument("--optimizer", default="adam", choices=["adam", "adagrad"])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", default=None)
    parser.add_argument("--quick", action="store_true", help="tiny model and batch (a smoke run)")
    return parser.parse_args(argv)


def model_shape(args: argparse.Namespace) -> Tuple[BiLMConfig, int, List[Tuple[int, ...]]]:
    """The biLM shape, the sampled softmax's sample count and the batch caps (SENTENCES, TOKENS) to time."""
    if args.quick:
        return SHAPES[args.shape or "tiny"], 64, [(8, 200)]
    cfg = Config().from_disk(args.config)
    batches = [tuple(int(x) for x in spec.split(":")) for spec in args.batches.split(",")]
    model = SHAPES[args.shape] if args.shape else BiLMConfig(**dict(cfg["model"]))
    return model, int(cfg["softmax"]["n_samples"]), batches


def training_batches(sentences: List[List[str]], vocab: Vocab, caps: Tuple[int, ...], count: int, max_chars: int) -> List[LMBatch]:
    """The first ``count`` batches training would make of ``sentences`` with these caps (SENTENCES, TOKENS)."""
    repeats = 1 + (caps[0] * count) // max(len(sentences), 1)  # enough text for ``count`` full batches
    planned = sentence_batches(
        iter(sentences * repeats), vocab, seed=0, epoch=0, batch_size=caps[0], max_batch_tokens=caps[1],
        buffer_size=20000, max_chars=max_chars,
    )
    return list(itertools.islice(planned, count))


def time_steps(lm: LanguageModel, optimizer: torch.optim.Optimizer, prepared: Dict, settings: List[tuple], rounds: int) -> Dict[tuple, List[float]]:
    """Seconds of a setting's batches (precision, threads, batch caps, loop) in each round after the first."""
    seconds: Dict[tuple, List[float]] = {s: [] for s in settings}
    for round_ in range(rounds + 1):
        for setting in settings:
            precision, n_threads, batch_spec, loop = setting
            torch.set_num_threads(n_threads)
            start = time.perf_counter()
            loop_context = {"ops": dispatch.op_by_op, "steps-torch-cells": train_step_module.torch_cells}.get(
                loop, contextlib.nullcontext)
            with loop_context():
                for batch in prepared[batch_spec]:
                    train_step(lm, optimizer, batch, precision)
            if round_:
                seconds[setting].append(time.perf_counter() - start)
    return seconds


def train_step(lm: LanguageModel, optimizer: torch.optim.Optimizer, batch: LMBatch, precision: str) -> None:
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
        out = lm.run_batch(batch)
    objective = 0.5 * (out["forward_nll"] + out["backward_nll"]) / len(batch.lengths)
    optimizer.zero_grad(set_to_none=True)
    objective.backward()
    torch.nn.utils.clip_grad_norm_(lm.parameters(), 10.0)
    optimizer.step()


def setting_rows(seconds: Dict[tuple, List[float]], prepared: Dict, precisions: List[str]) -> List[Dict]:
    """Per setting: tokens/s (median and range) and, round by round, its speed relative to fp32 and
    to the op-by-op loop (same other settings; None where that setting was not run)."""
    rows = []
    for setting in seconds:
        precision, n_threads, caps, loop = setting
        batches = prepared[caps]
        tokens = sum(b.n_targets for b in batches)
        rates = [tokens / s for s in seconds[setting]]
        row = {
            "precision": precision, "threads": n_threads, "loop": loop, "batches": len(batches),
            "batch_sentences": sum(len(b.lengths) for b in batches), "batch_tokens": tokens,
            "tokens_per_s_median": statistics.median(rates), "tokens_per_s_min": min(rates), "tokens_per_s_max": max(rates),
        }
        for name, base in (("x_fp32", ("fp32", n_threads, caps, loop)), ("x_ops", (precision, n_threads, caps, "ops")),
                           ("x_torch_cells", (precision, n_threads, caps, "steps-torch-cells"))):
            ratios = [b / s for b, s in zip(seconds[base], seconds[setting])] if base in seconds else []
            row.update({f"{name}_median": statistics.median(ratios) if ratios else None,
                        f"{name}_min": min(ratios) if ratios else None, f"{name}_max": max(ratios) if ratios else None})
        rows.append(row)
    return rows


def read_sentences(path: Optional[str], *, quick: bool) -> List[List[str]]:
    if path is None:
        if not quick:
            raise SystemExit("--text FILE is needed (whitespace-tokenized, a sentence a line)")
        words = "the bank of the river flooded after the storm and the bank closed early".split()
        return [words[i:] + words[:i] for i in range(12)]
    source = Path(path)
    if not source.is_file():
        raise SystemExit(f"--text: no such file: {source}")
    lines = source.read_text(encoding="utf-8").splitlines()
    return [line.split()[:64] for line in lines if line.split()]


def markdown(report: Dict) -> str:
    machine = report["machine"]
    lines = [
        f"# One pretraining step: {report['provenance']['cpu']}",
        "",
        f"`{report['command']}`",
        "",
        f"torch {machine['torch']}, CPU capability {machine['cpu_capability']}, flags: {', '.join(machine['cpu_flags'])}; "
        f"optimizer {report['optimizer']}, sampled softmax {report['softmax_samples']} of {report['vocab']} words; "
        f"{report['rounds']} interleaved rounds after a warm-up round, each timing {report['steps']} training batches "
        "of a setting (sentences and tokens: their totals).",
        "",
        "| precision | threads | LSTM loop | sentences | tokens | tokens/s (median) | range | x fp32 (median) | range | x ops (median) | range | x torch cells (median) | range |",
        "|---|---:|---|---:|---:|---:|---|---:|---|---:|---|---:|---|",
    ]
    for r in report["rows"]:
        ratios = [_ratio(r, "x_fp32"), _ratio(r, "x_ops"), _ratio(r, "x_torch_cells")]
        lines.append(
            f"| {r['precision']} | {r['threads']} | {r['loop']} | {r['batch_sentences']} | {r['batch_tokens']} | "
            f"{r['tokens_per_s_median']:.0f} | {r['tokens_per_s_min']:.0f}-{r['tokens_per_s_max']:.0f} | "
            + " | ".join(f"{median} | {spread}" for median, spread in ratios) + " |"
        )
    return "\n".join(lines) + "\n"


def _ratio(row: Dict, name: str) -> Tuple[str, str]:
    if row[f"{name}_median"] is None:
        return "", ""
    return f"{row[f'{name}_median']:.2f}", f"{row[f'{name}_min']:.2f}-{row[f'{name}_max']:.2f}"


if __name__ == "__main__":
    main()
