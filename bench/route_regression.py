"""Does choosing the fp32 route ever cost speed? The default path as chosen, against torch's route alone.

    python -m bench.route_regression --json results/bench/MACHINE/route-regression.json [--markdown ...]
    python -m bench.route_regression --quick

For each instruction-set setting, a child process of its own:

- ``native``: the libraries as this CPU runs them;
- ``avx2``: oneDNN, MKL, ATen's kernels and the kernel library held to AVX2 by their own switches
  (``ONEDNN_MAX_CPU_ISA=AVX2``, ``MKL_ENABLE_INSTRUCTIONS=AVX2``, ``ATEN_CPU_CAPABILITY=avx2``,
  ``SPACY_ELMO_KERNEL_VARIANT=avx2``): the code an AVX2-only CPU runs, on this CPU's cores, caches
  and memory. It is not an AVX2 machine; it shows what the choice does when both libraries have
  AVX2 code only.

Each child loads ``--shape`` with random weights (written in the published format and read back),
optimizes it as ``load_bilm`` does, choosing its routes afresh (``payoff.measuring_anew(keep=False)``:
no kept choice is read, none is written: ``fast/route_cache.py``), and times three settings of the same model, interleaved over
``--rounds`` rounds after a warm-up: the routes as chosen, torch's in both regimes (MKL: what the
default path ran before it had routes), and oneDNN's in both. The workloads: a batch of ``--batch``
EWT sentences of 20-30 tokens, and ``--single`` of them one at a time. A probe process under the
same switches runs one product on each library with their verbose logs on and records the
instruction set each says it used. The record gives, per setting and workload, tokens/s (median,
min, max) and, round by round, as chosen / torch's (median, min, max): where that holds at 1 or
above, the choice costs nothing.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional

import torch

from spacy_elmo.fast import kernel_variants, optimize_for_inference, payoff, prepacked
from spacy_elmo.fast.optimize import use_routes
from spacy_elmo.records.provenance import mark_start

from .bandwidth import cpu_record
from .bench_tf_peer import interleaved, ours
from .workloads import (
    PUBLISHED_NAMES,
    REPO,
    add_data_options,
    bench_command,
    benchmark_sentences,
    char_batch,
    finish_random_shape_report,
    published_bilm,
    resolve_data_options,
)

ISA_SETTINGS: Dict[str, Dict[str, str]] = {
    "native": {},
    "avx2": {
        "ONEDNN_MAX_CPU_ISA": "AVX2",
        "MKL_ENABLE_INSTRUCTIONS": "AVX2",
        "ATEN_CPU_CAPABILITY": "avx2",
        kernel_variants.ENV: "avx2",
    },
}
ROUTE_SETTINGS = {
    "as chosen": None,
    "torch": prepacked.TORCH_ROUTES,
    "onednn": prepacked.Routes(prepacked.ONEDNN, prepacked.ONEDNN),
}
# one fp32 product on each library, with their verbose logs on: the instruction set each uses
PROBE = """
import torch
torch.set_num_threads(1)
x = torch.randn(64, 256)
w = torch.randn(512, 256)
torch.mm(x, w.t())
packed = torch.ops.mkldnn._reorder_linear_weight(w)
torch.ops.mkldnn._linear_pointwise(x, packed, None, "none", [], "")
"""


def main(argv: Optional[List[str]] = None) -> Dict:
    args = parse_args(argv)
    if args.child:
        return child(args)
    report: Dict = {"command": bench_command("bench.route_regression", argv)}
    mark_start(report["command"])
    started = time.time()
    report["machine"] = {"cpu": cpu_record(), "threads": args.threads, "load_average_before": list(os.getloadavg())}
    report["settings"] = {}
    for name in args.isa.split(","):
        switches = ISA_SETTINGS[name]
        with tempfile.TemporaryDirectory(prefix="route-regression-") as tmp:
            out = Path(tmp) / "child.json"
            env = {**os.environ, **switches}
            command = [sys.executable, "-m", "bench.route_regression", "--child", str(out), "--shape", args.shape,
                       "--threads", str(args.threads), "--rounds", str(args.rounds), "--batch", str(args.batch),
                       "--single", str(args.single), "--test-data", str(args.test_data)]
            subprocess.run(command, env=env, cwd=REPO, check=True)
            entry = json.loads(out.read_text(encoding="utf-8"))
        entry["switches"] = switches
        entry["libraries_report"] = probe(switches)
        report["settings"][name] = entry
        print(f"{name}: done", file=sys.stderr, flush=True)
    return finish_random_shape_report(report, args, started, markdown)


def child(args: argparse.Namespace) -> Dict:
    """One instruction-set setting (the switches are in this process's environment)."""
    torch.set_num_threads(args.threads)
    sentences, source = benchmark_sentences(args.batch, args.test_data)
    singles = sentences[: args.single]
    tokens = {"batch": sum(map(len, sentences)), "one sentence": sum(map(len, singles))}
    with tempfile.TemporaryDirectory(prefix="route-regression-model-") as tmp:
        model = published_bilm(args.shape, Path(tmp))
    with payoff.measuring_anew(keep=False):
        optimize_for_inference(model)
    chosen = model.runner.routes
    measured = payoff.chosen_routes()
    batch = char_batch(sentences, model.config.max_characters_per_token)
    ones = [char_batch([sentence], model.config.max_characters_per_token) for sentence in singles]

    def on(routes: Optional[prepacked.Routes], runs):
        run = ours(model, runs)

        def timed() -> float:
            use_routes(model, chosen if routes is None else routes)
            return run()

        return timed

    runs = {
        "batch": {name: on(routes, [batch]) for name, routes in ROUTE_SETTINGS.items()},
        "one sentence": {name: on(routes, ones) for name, routes in ROUTE_SETTINGS.items()},
    }
    seconds = interleaved(runs, args.rounds)
    result: Dict = {"routes_chosen": chosen._asdict(), "route_measurements": measured,
                    "kernel_variant": kernel_variants.chosen().name, "cpu_capability": torch.backends.cpu.get_cpu_capability(),
                    "sentences": {"source": source, **{f"{w}_tokens": n for w, n in tokens.items()}}, "workloads": {}}
    for workload, modes in seconds.items():
        entry: Dict = {}
        for name, times in modes.items():
            rates = sorted(tokens[workload] / t for t in times)
            entry[name] = {"tokens_per_s": statistics.median(rates), "tokens_per_s_min": rates[0],
                           "tokens_per_s_max": rates[-1], "rounds": len(rates)}
        ratios = sorted(t / c for c, t in zip(modes["as chosen"], modes["torch"]))
        entry["as_chosen_vs_torch"] = {"median": statistics.median(ratios), "min": ratios[0], "max": ratios[-1]}
        result["workloads"][workload] = entry
    Path(args.child).write_text(json.dumps(result, indent=1, allow_nan=False), encoding="utf-8")
    return result


def probe(switches: Dict[str, str]) -> Dict[str, List[str]]:
    """What MKL and oneDNN say, under ``switches``, about the instructions they use."""
    env = {**os.environ, **switches, "ONEDNN_VERBOSE": "1", "MKL_VERBOSE": "1"}
    done = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, check=True)
    lines = done.stdout.splitlines()
    return {
        "mkl": sorted({line.split(" ", 2)[-1].strip() for line in lines if line.startswith("MKL_VERBOSE") and "processors" in line}),
        "onednn": sorted({line.strip() for line in lines if line.startswith("onednn_verbose") and ",info,cpu,isa:" in line}),
    }


def markdown(report: Dict) -> str:
    lines = [
        f"`{report['command']}`",
        "",
        f"{report['shape']}, random weights; {report['machine']['threads']} threads; CPU: {report['machine']['cpu'].get('model', '?')}.",
        "",
        "| instruction sets | routes chosen (one sentence, batch) | workload | as chosen tok/s | torch's tok/s | oneDNN's tok/s | as chosen / torch's (median, range) |",
        "|---|---|---|---:|---:|---:|---|",
    ]
    for name, entry in report["settings"].items():
        chosen = entry["routes_chosen"]
        for workload, rows in entry["workloads"].items():
            ratio = rows["as_chosen_vs_torch"]
            lines.append(
                f"| {name} | {chosen['one_sentence']}, {chosen['batch']} | {workload} | {rows['as chosen']['tokens_per_s']:.0f} | "
                f"{rows['torch']['tokens_per_s']:.0f} | {rows['onednn']['tokens_per_s']:.0f} | "
                f"{ratio['median']:.2f} ({ratio['min']:.2f}-{ratio['max']:.2f}) |")
    return "\n".join(lines) + "\n"


def parse_args(argv: Optional[List[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shape", default="full", choices=sorted(PUBLISHED_NAMES))
    parser.add_argument("--isa", default="native,avx2", help="comma-separated instruction-set settings: " + ", ".join(ISA_SETTINGS))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--batch", type=int, default=64, help="sentences in the batch")
    parser.add_argument("--single", type=int, default=8, help="sentences run one at a time")
    parser.add_argument("--quick", action="store_true", help="the tiny shape, few sentences, 2 rounds (a smoke run)")
    parser.add_argument("--json", default=None)
    parser.add_argument("--markdown", default=None)
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    add_data_options(parser, test=True, train=False)
    args = parser.parse_args(argv)
    if args.quick:
        args.shape, args.rounds, args.batch, args.single = "tiny", 2, 8, 2
    resolve_data_options(args)
    return args


if __name__ == "__main__":
    main()
