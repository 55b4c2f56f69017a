"""Tokens/s of the exported biLM on each runtime against the project's own path, in one interleaved run.

    python -m bench.bench_export --shapes en_small,full --sentences 32 --repeats 5 --threads 1 \
        --test-data sample/ewt/test.conllu --json results/export/bench-CPU.json
    python -m bench.bench_export --quick    # en_small, a few sentences: a smoke run

Modes, each timed on the same sentences from token strings to layers (the char-id step included):
"load_bilm" (the project's path: ``load_bilm``'s default, ``optimize_for_inference``), "torchscript"
and "onnxruntime" (the files ``spacy_elmo.export`` writes, run by ``ExportedBiLM``: the reference
computation on TorchScript's interpreter and on ONNX Runtime's CPU provider). Shapes: "en_small"
(the shipped biLM) and "full" (the published original shape 2x4096_512, random weights: normal,
std 0.035, torch seed 0; the products are what is measured). In each repeat every mode embeds all
sentences, the order rotated between repeats; a warm-up pass first. Reported per mode: the median
tokens/s over the repeats and its range (min, max); the largest absolute difference of its layers
from the plain reference (``load_bilm(..., optimize=False)``); the load average before and after.
"""
import argparse
import copy
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional

import numpy as np
import torch

from spacy_elmo.bilm import BiLM
from spacy_elmo.bilm.config import ORIGINAL
from spacy_elmo.export import ExportedBiLM, export_bilm
from spacy_elmo.fast import optimize_for_inference
from spacy_elmo.io import load_bilm
from spacy_elmo.records.provenance import data_record, mark_start, model_record, provenance

from .bandwidth import cpu_record
from .bench_bilm import machine_info
from .workloads import bench_command, benchmark_sentences, data_file

MODES = ("load_bilm", "torchscript", "onnxruntime")


def main(argv: Optional[List[str]] = None) -> Dict:
    args = parse_args(argv)
    report: Dict = {"command": bench_command("bench.bench_export", argv)}
    mark_start(report["command"])
    torch.set_num_threads(args.threads)
    started = time.time()
    report["machine"] = {**machine_info(args.threads), "cpu": cpu_record()}
    report["note"] = f"{args.load}; compare the modes within this run (interleaved), not with other runs"
    sentences, source = benchmark_sentences(args.sentences, args.test_data, min_len=10, max_len=30)
    tokens = sum(map(len, sentences))
    report["sentences"] = {"source": source, "count": len(sentences), "tokens": tokens, "batch_size": args.batch_size}
    report["statistic"] = f"median tokens/s over {args.repeats} interleaved repeats, with (min, max)"
    report["load_average"] = {"before": os.getloadavg()}
    report["shapes"] = {}
    for shape in args.shapes.split(","):
        report["shapes"][shape] = bench_shape(shape, sentences, tokens, args)
    report["load_average"]["after"] = os.getloadavg()
    report["provenance"] = provenance(
        model=[model_record()],
        model_note="en_small: the shipped biLM; full: random weights (normal, std 0.035, torch seed 0) of "
        "the published original shape 2x4096_512",
        data=data_record([data_file(args.test_data, "test")]))
    report["seconds"] = time.time() - started
    print(summary(report))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return report


def shape_model(shape: str) -> BiLM:
    """The plain reference biLM of a shape."""
    if shape == "en_small":
        return load_bilm(optimize=False)
    if shape != "full":
        raise SystemExit(f"unknown shape {shape!r}: en_small or full")
    torch.manual_seed(0)
    bilm = BiLM(ORIGINAL).eval()
    with torch.no_grad():
        for parameter in bilm.parameters():
            parameter.normal_(0.0, 0.035)
    return bilm


def bench_shape(shape: str, sentences, tokens: int, args) -> Dict:
    plain = shape_model(shape)
    reference = plain.embed(sentences, batch_size=args.batch_size)
    optimized = optimize_for_inference(copy.deepcopy(plain))
    result: Dict = {"config": plain.config.to_options()}
    with tempfile.TemporaryDirectory() as work:
        started = time.time()
        for fmt in ("onnx", "torchscript"):
            export_bilm(plain, Path(work) / f"model.{fmt}", fmt, model={"name": shape})
        result["export_seconds"] = time.time() - started
        scripted = ExportedBiLM(Path(work) / "model.torchscript", module=torch.jit.load(str(Path(work) / "model.torchscript")))
        onnx = ExportedBiLM(Path(work) / "model.onnx", threads=args.threads)
        runs: Dict[str, Callable[[], List[np.ndarray]]] = {
            "load_bilm": lambda: optimized.embed(sentences, batch_size=args.batch_size),
            "torchscript": lambda: scripted.embed(sentences, batch_size=args.batch_size),
            "onnxruntime": lambda: onnx.embed(sentences, batch_size=args.batch_size),
        }
        times: Dict[str, List[float]] = {mode: [] for mode in MODES}
        with torch.no_grad():
            for mode in MODES:  # warm-up, and the outputs compared with the reference
                layers = runs[mode]()
                result.setdefault("max_abs_diff_to_reference", {})[mode] = max(
                    float(np.abs(a - b).max()) for a, b in zip(layers, reference))
            for r in range(args.repeats):
                for mode in MODES[r % len(MODES):] + MODES[: r % len(MODES)]:
                    start = time.perf_counter()
                    runs[mode]()
                    times[mode].append(time.perf_counter() - start)
    result["tokens_per_s"] = {
        mode: {"median": tokens / statistics.median(seconds), "min": tokens / max(seconds),
               "max": tokens / min(seconds), "seconds": seconds}
        for mode, seconds in times.items()
    }
    return result


def summary(report: Dict) -> str:
    lines = [f"{report['sentences']['count']} sentences, {report['sentences']['tokens']} tokens; "
             f"{report['statistic']}; {report['machine']['cpu']['model']}, {report['machine']['threads']} threads"]
    for shape, result in report["shapes"].items():
        for mode, stats in result["tokens_per_s"].items():
            lines.append(f"{shape:9s} {mode:12s} {stats['median']:9.1f} tokens/s ({stats['min']:.1f}-{stats['max']:.1f}), "
                         f"max abs diff to the reference {result['max_abs_diff_to_reference'][mode]:.2e}")
    return "\n".join(lines)


def parse_args(argv: Optional[List[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shapes", default="en_small,full", help="comma-separated: en_small, full")
    parser.add_argument("--sentences", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--test-data", type=Path, default=None, help="a CoNLL-U file (default: EWT's test set)")
    parser.add_argument("--quick", action="store_true", help="en_small, 4 sentences, 2 repeats: a smoke run")
    parser.add_argument("--load", default="a shared machine, loaded by other jobs while this ran",
                        help="what else ran on the machine (recorded)")
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    if args.quick:
        args.shapes, args.sentences, args.repeats = "en_small", min(args.sentences, 4), min(args.repeats, 2)
    return args


if __name__ == "__main__":
    main()
