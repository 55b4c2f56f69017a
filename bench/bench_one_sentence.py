"""One sentence at a time, per precision: tokens/s against fp32, and against the memory's limit.

    python -m bench.bench_one_sentence --shape full --sentences 24 --rounds 3 --threads 2 \
        --test-data sample/ewt/test.conllu --json results/bench/CPU/one-sentence.json \
        --markdown results/bench/CPU/one-sentence.md
    python -m bench.bench_one_sentence --quick    # tiny model (cosines on en_small), seconds

As a service embedding one sentence per request runs it: the biLM steps one timestep at a time
for one row. The model has a published shape with random weights (normal, std 0.035, torch seed 0;
not written to and read from the published format: the products are what is measured). Every
precision runs ``optimize_for_inference`` on its own copy; "bf16, torch products" is bf16 with
``bf16_rows.ROWS = 0`` (the one-row products on torch's bf16 kernels, as before the packed kernel).
In every round each mode runs all sentences in turn, the order rotated between rounds (interleaved),
and the one-row products of a timestep are timed alone (``step_products``: where a step's time goes).
Recorded with them: the memory bandwidth (torch triad, before and after), the load average, the
rate torch's float32 one-row products reach on the model's own weights, bytes of recurrent weights
read per timestep in each precision, and each mode's tokens/s as a fraction of the limit those
bytes and the bandwidth set (a floor on a timestep's time where the weights do not fit in cache).
"""
import argparse
import copy
import os
import sys
import time
import warnings
from pathlib import Path
from contextlib import contextmanager
from typing import Callable, Dict, Iterator, List, Optional

import numpy as np
import torch

from spacy_elmo.bilm import BiLM
from spacy_elmo.fast import bf16_rows, int8_rows, optimize_for_inference, payoff
from spacy_elmo.fast.lockstep import paired_weights
from spacy_elmo.fast.precision import BF16, FP32, choose_precision
from spacy_elmo.io.loading import load_bilm
from spacy_elmo.records.provenance import data_record, mark_start, model_record, provenance

from .bandwidth import cpu_record
from .bench_bilm import machine_info
from .hardware import MatvecRate, memory_record, weights_regime
from .workloads import (
    SHAPES, bench_command, benchmark_sentences, char_batch, cosines, data_file, recurrent_bytes_per_step, write_report,
)

TORCH_BF16 = "bf16, torch products"
MODES = {"fp32": "fp32", "bf16": "bf16", TORCH_BF16: "bf16", "int8": "int8"}
BYTES = {"fp32": 4, "bf16": 2, "int8": 1}


def main(argv: Optional[List[str]] = None) -> Dict:
    args = parse_args(argv)
    report: Dict = {"command": bench_command("bench.bench_one_sentence", argv)}
    mark_start(report["command"])
    torch.set_num_threads(args.threads)
    started = time.time()
    report["machine"] = {**machine_info(args.threads), "cpu": cpu_record(), "bf16_rows_avx512bf16": bf16_rows.native()}
    report["note"] = (f"{args.load}; load averages below: compare the modes within this run, not with other runs")
    report["memory"] = {"before": memory_record([args.threads], repeats=3 if args.quick else 10)}
    shape = "tiny" if args.quick else args.shape
    config = SHAPES[shape]
    sentences, source = benchmark_sentences(args.sentences, args.test_data, min_len=5 if args.quick else 20)
    report["sentences"] = {"source": source, "count": len(sentences), "tokens": sum(map(len, sentences))}
    torch.manual_seed(0)
    plain = BiLM(config).eval()
    with torch.no_grad():
        for parameter in plain.parameters():
            parameter.normal_(0.0, 0.035)
    models = {name: optimize_for_inference(copy.deepcopy(plain), precision=p, char_cache_size=args.char_cache)
              for name, p in MODES.items()}
    del plain
    runs = [char_batch([s], config.max_characters_per_token) for s in sentences]
    result = run_rounds(models, runs, args.rounds)
    steps = sum(int(lengths.sum()) for _, lengths in runs)  # timesteps: each sentence's tokens + <S>, </S>
    fp32_pairs = [paired_weights(*pair) for pair in pairs_of(models["fp32"])]
    matvec = MatvecRate([[w for paired in fp32_pairs for w in paired[1:]]], steps)
    matvec_s = min(matvec() for _ in range(3 if args.quick else 5))
    report["step_products"] = step_products(models, 5 if args.quick else args.product_repeats)
    report["memory"]["after"] = memory_record([args.threads], repeats=3 if args.quick else 10)
    bandwidth = max(report["memory"][k]["triad_gb_per_s"][str(args.threads)]["median"] for k in ("before", "after"))
    caches = report["memory"]["before"]["caches"]
    fp32_bytes = recurrent_bytes_per_step(config, 4)
    report["limits"] = {
        "timesteps": steps,
        "triad_gb_per_s_median": bandwidth,
        "torch_fp32_matvec_gb_per_s": fp32_bytes * steps / matvec_s / 1e9,
        "torch_fp32_matvec_tokens_per_s": result["tokens"] / matvec_s,
    }
    for name, stats in result["modes"].items():
        per_weight = BYTES[MODES[name]]
        step_bytes = recurrent_bytes_per_step(config, per_weight)
        floor_s = step_bytes * steps / (bandwidth * 1e9)
        stats.update({
            "weight_bytes_per_step": step_bytes,
            "weights_regime": weights_regime(step_bytes, caches, args.threads),
            "memory_limit_tokens_per_s": result["tokens"] / floor_s,
            "fraction_of_memory_limit": floor_s / stats["seconds"],
            "weights_gb_per_s": step_bytes * steps / stats["seconds"] / 1e9,
        })
    report.update(shape=shape, config=config.to_options(), char_cache_size=args.char_cache, **result)
    report["accuracy"] = accuracy(args.accuracy_model, sentences[:2] if args.quick else sentences)
    report["provenance"] = provenance(
        model=[model_record(args.accuracy_model)],
        model_note=f"speed: random weights (std 0.035, torch seed 0) of the {shape} shape; accuracy: {args.accuracy_model}",
        data=data_record([data_file(args.test_data, "test")]))
    report["load_average"] = {k: report["memory"][k]["load_average"] for k in ("before", "after")}
    report["seconds"] = time.time() - started
    text = markdown(report)
    print(text)
    write_report(report, text, args.json, args.markdown)
    return report


def run_rounds(models: Dict[str, BiLM], runs, rounds: int) -> Dict:
    """Every mode over all sentences one at a time, per round, in an order rotated between rounds."""
    names = list(models)
    times: Dict[str, List[float]] = {name: [] for name in names}
    outputs = {}
    loads = []
    with torch.no_grad(), warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        for name in names:  # warm-up (packing, compiling, the payoff check), and the outputs to compare
            with products_of(name):
                outputs[name] = [run(models[name], ids, lengths) for ids, lengths in runs]
        for r in range(rounds):
            for name in names[r % len(names):] + names[: r % len(names)]:
                with products_of(name):
                    start = time.perf_counter()
                    for ids, lengths in runs:
                        run(models[name], ids, lengths)
                    times[name].append(time.perf_counter() - start)
                log(f"round {r}: {name} {times[name][-1]:.2f} s")
            loads.append(list(os.getloadavg()))
    tokens = sum(int(lengths.sum()) - 2 for _, lengths in runs)
    modes = {}
    for name in names:
        cos = np.concatenate([cosines(a[:, 0].float().numpy(), b[:, 0].float().numpy()).ravel()
                              for a, b in zip(outputs["fp32"], outputs[name])])
        paired = [f / t for f, t in zip(times["fp32"], times[name])]  # the same round's fp32 time over this one's
        modes[name] = {
            "seconds": min(times[name]), "median_seconds": float(np.median(times[name])), "round_seconds": times[name],
            "tokens_per_s": tokens / min(times[name]),
            "x_fp32_best": min(times["fp32"]) / min(times[name]),
            "x_fp32_per_round": paired, "x_fp32_median": float(np.median(paired)),
            "cosine_to_fp32_mean": float(cos.mean()), "cosine_to_fp32_min": float(cos.min()),
        }
    # what the first pass in each precision said (spacy_elmo/fast/payoff.py: a measurement at that pass)
    warned = [str(w.message) for w in said if "slower than fp32" in str(w.message)]
    return {"tokens": tokens, "rounds": rounds, "load_average_per_round": loads, "modes": modes, "payoff_warnings": warned}


def accuracy(name: str, sentences: List[List[str]]) -> Dict:
    """Each precision on a model's real weights (the published shapes' random weights have small
    activations; trained ones stray further in int8, docs/speed.md): per-token cosines of every
    layer's vectors to fp32's, one sentence at a time, and how far a sentence's vectors move when it
    runs in a batch of all of them instead of alone (max abs difference; per-row int8 ranges keep it
    at float32 rounding)."""
    plain = load_bilm(name, optimize=False)
    config = plain.config
    runs = [char_batch([s], config.max_characters_per_token) for s in sentences]
    ids, lengths = char_batch(sentences, config.max_characters_per_token)
    alone: Dict[str, List[torch.Tensor]] = {}
    modes = {}
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the precision check's timing, recorded by the speed rounds
        for precision in ("fp32", "bf16", "int8"):
            model = optimize_for_inference(copy.deepcopy(plain), precision=precision)
            alone[precision] = [run(model, i, l)[:, 0] for i, l in runs]
            batch = run(model, ids, lengths)
            moved = max(float((a[:, :len(s)] - batch[:, row, :len(s)]).abs().max())
                        for row, (a, s) in enumerate(zip(alone[precision], sentences)))
            cos = np.concatenate([cosines(f[:, :len(s)].float().numpy(), a[:, :len(s)].float().numpy()).ravel()
                                  for f, a, s in zip(alone["fp32"], alone[precision], sentences)])
            modes[precision] = {"cosine_to_fp32_mean": float(cos.mean()), "cosine_to_fp32_min": float(cos.min()),
                                "max_abs_change_alone_vs_batch": moved}
    return {"model": name, "shape": f"{config.n_layers}x{config.dim}_{config.projection_dim}", "modes": modes}


def run(model: BiLM, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    return model(ids, lengths).layers


@contextmanager
def products_of(name: str) -> Iterator[None]:
    """Within this block, "bf16, torch products" runs its one-row products on torch's bf16 kernels."""
    rows = bf16_rows.ROWS
    bf16_rows.ROWS = 0 if name == TORCH_BF16 else rows
    try:
        yield
    finally:
        bf16_rows.ROWS = rows


def step_products(models: Dict[str, BiLM], repeats: int) -> Dict[str, Dict[str, float]]:
    """One timestep's one-row products (both layers, both directions; ``payoff.step_products``), and
    the per-step conversions of bf16 on torch's products, each timed alone, interleaved: microseconds."""
    ops: Dict[str, Callable[[], object]] = {}
    for name in ("bf16", "int8"):
        pairs = list(zip(models[name].forward_lstm.layers, models[name].backward_lstm.layers))
        chosen = choose_precision(name)
        products = payoff.step_products(pairs, chosen, 1)
        ops.setdefault("fp32 products (baddbmm, bmm)", products[FP32])
        label = {"bf16": "bf16 products, packed kernel" if bf16_rows.native() else "bf16 products, portable kernel",
                 "int8": "int8 products, VNNI kernel" if int8_rows.native() else "int8 products, portable kernel"}[name]
        ops[label] = products[chosen]
    with products_of(TORCH_BF16):  # torch's bf16 products, as before the kernel
        ops["bf16 products, torch (bmm, with the conversions)"] = payoff.step_products(pairs_of(models["bf16"]), BF16, 1)[BF16]
    proj, dim = models["fp32"].config.projection_dim, models["fp32"].config.dim
    h, hidden, p = torch.randn(2, 1, proj), torch.randn(2, 1, dim), torch.randn(2, 1, 4 * dim)
    gates, low = torch.empty(2, 1, 4 * dim), torch.empty(2, 1, 4 * dim, dtype=torch.bfloat16)
    n_layers = models["fp32"].config.n_layers
    ops["bf16 conversions alone (casts in, copies and add out)"] = lambda: [
        (h.bfloat16(), hidden.bfloat16(), gates.copy_(low).add_(p), gates[..., :proj].copy_(low[..., :proj]))
        for _ in range(n_layers)
    ]
    times: Dict[str, List[float]] = {name: [] for name in ops}
    with torch.no_grad():
        for fn in ops.values():
            fn()
        for _ in range(repeats):
            for name, fn in ops.items():
                start = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - start)
    return {name: {"best_us": min(t) * 1e6, "median_us": float(np.median(t)) * 1e6, "max_us": max(t) * 1e6} for name, t in times.items()}


def pairs_of(model: BiLM):
    return list(zip(model.forward_lstm.layers, model.backward_lstm.layers))


def markdown(report: Dict) -> str:
    limits = report["limits"]
    lines = [
        f"# One sentence at a time, {report['shape']} shape ({report['sentences']['count']} sentences, {report['tokens']} tokens)",
        "",
        f"{report['note']}. Load average before {fmt(report['load_average']['before'])}, after "
        f"{fmt(report['load_average']['after'])}, per round {', '.join(fmt(l[:1]) for l in report['load_average_per_round'])}. "
        f"CPU: {report['machine']['cpu']['model']}; torch {report['machine']['torch']}, "
        f"{report['machine']['threads']} threads; packed bf16 kernel with AVX512-BF16: {report['machine']['bf16_rows_avx512bf16']}; "
        f"char-CNN cache: {report['char_cache_size'] or 'none'} tokens.",
        "",
        f"Memory bandwidth (torch triad, median): {limits['triad_gb_per_s_median']:.1f} GB/s; torch's float32 one-row "
        f"products on the model's recurrent weights: {limits['torch_fp32_matvec_gb_per_s']:.1f} GB/s "
        f"({limits['torch_fp32_matvec_tokens_per_s']:.1f} tokens/s if a timestep were those products alone).",
        "",
        "| mode | tokens/s (best of rounds) | x fp32 (best) | x fp32 per round (median, range) | weights read per step | regime | % of memory limit | cosine to fp32 (mean, min) |",
        "|---|---:|---:|---|---:|---|---:|---|",
    ]
    for name, s in report["modes"].items():
        per_round = s["x_fp32_per_round"]
        lines.append(
            f"| {name} | {s['tokens_per_s']:.1f} | {s['x_fp32_best']:.2f} | {s['x_fp32_median']:.2f} ({min(per_round):.2f}-{max(per_round):.2f}) "
            f"| {s['weight_bytes_per_step'] / 1e6:.1f} MB | {s['weights_regime']} | {100 * s['fraction_of_memory_limit']:.0f}% "
            f"| {s['cosine_to_fp32_mean']:.6f}, {s['cosine_to_fp32_min']:.6f} |"
        )
    acc = report["accuracy"]
    lines += ["", f"On {acc['model']}'s real weights ({acc['shape']}), the same sentences:", "",
              "| precision | cosine to fp32, one sentence at a time (mean, min) | max abs change of a sentence's vectors, alone vs in a batch of all |",
              "|---|---|---:|"]
    for name, a in acc["modes"].items():
        lines.append(f"| {name} | {a['cosine_to_fp32_mean']:.6f}, {a['cosine_to_fp32_min']:.6f} | {a['max_abs_change_alone_vs_batch']:.1e} |")
    lines += ["", "One timestep's one-row products, each timed alone, interleaved (microseconds):", "",
              "| operation | best | median | max |", "|---|---:|---:|---:|"]
    for name, t in report["step_products"].items():
        lines.append(f"| {name} | {t['best_us']:.0f} | {t['median_us']:.0f} | {t['max_us']:.0f} |")
    lines += ["", "What the first one-sentence pass in each precision said (`spacy_elmo/fast/payoff.py`):", ""]
    lines += [f"- {text}" for text in report["payoff_warnings"]] or ["- nothing: no precision measured slower than fp32"]
    return "\n".join(lines) + "\n"


def fmt(values) -> str:
    return "/".join(f"{v:.1f}" for v in values)


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def parse_args(argv: Optional[List[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", default="full", choices=sorted(SHAPES))
    parser.add_argument("--sentences", type=int, default=24)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--product-repeats", type=int, default=20)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--test-data", type=Path, default=None, help="a CoNLL-U file (default: EWT's test set)")
    parser.add_argument("--quick", action="store_true", help="a tiny model and a few sentences: a smoke run")
    parser.add_argument("--char-cache", type=int, default=0,
                        help="token encodings cached (load_bilm's default is 20000): with it, the sentences' tokens are "
                             "encoded in the warm-up pass only, as a service's frequent tokens are")
    parser.add_argument("--accuracy-model", default="en_small", help="the model whose real weights the cosines are taken on")
    parser.add_argument("--load", default="a shared machine, loaded by other jobs while this ran",
                        help="what else ran on the machine (recorded)")
    parser.add_argument("--json")
    parser.add_argument("--markdown")
    args = parser.parse_args(argv)
    if args.quick:
        args.sentences, args.rounds = min(args.sentences, 4), min(args.rounds, 2)
    return args


if __name__ == "__main__":
    main()
