"""Where one sentence's time goes, timestep by timestep: products, elementwise ops, and overhead.

    python -m bench.profile_step --shapes shipped full --json results/bench/CPU/profile-step.json --markdown results/bench/CPU/profile-step.md
    python -m bench.profile_step --quick

Runs sentences of UD EWT test one at a time through ``load_bilm``'s default inference path
(``optimize_for_inference``, fp32, char cache filled with frequent tokens, as the component runs;
where the compiled timestep loop is available, again with the loop in Python), first timed without the profiler (best of ``--repeats``), then once under ``torch.profiler``. The
profile's operator self times are grouped into the LSTM's matrix products (recurrent product,
output projection, input projection), its elementwise ops, and everything else; the share of the
profiled wall time that no operator accounts for is Python and dispatch overhead. Shares are
divided over the LSTM timesteps (positions x layers; both directions run in one lockstep step), so
"us per timestep" reads as the cost of one step of one layer pair. The profiler adds its own
overhead per op: the shares, not its absolute times, are the result; the untimed "tokens/s" row is
the speed. The compiled loop's own time (``spacy_elmo::lstmp_steps``, its products excluded) counts
as elementwise: it is the fused gates-and-cell step and the loop around it.
"""
import argparse
import json
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Dict, List, Optional

import torch
from torch.profiler import ProfilerActivity, profile

from spacy_elmo.fast import compiled, dispatch, in_place
from spacy_elmo.fast import optimize_for_inference
from spacy_elmo.records.provenance import data_record, mark_start, provenance

from .workloads import (
    add_data_options,
    bench_command,
    benchmark_sentences,
    data_file,
    frequent_tokens,
    published_bilm,
    resolve_data_options,
    shapes_model,
)

PRODUCTS = {"aten::bmm", "aten::baddbmm", "aten::addmm", "aten::mm", "aten::linear", "aten::matmul"}
ELEMENTWISE = {
    "spacy_elmo::lstmp_steps",  # the compiled loop: its own time is the fused elementwise step
    "aten::sigmoid_", "aten::tanh_", "aten::mul_", "aten::mul", "aten::add_", "aten::add", "aten::sub_",
    "aten::clamp_", "aten::clamp", "aten::copy_", "aten::to", "aten::_to_copy",
}


def main(argv: Optional[List[str]] = None) -> Dict:
    args = parse_args(argv)
    command = bench_command("bench.profile_step", argv)
    mark_start(command)
    torch.set_num_threads(args.threads)
    read = [data_file(args.test_data, "test")] + ([] if args.quick else [data_file(args.train_data, "train")])
    report: Dict = {"command": command, "provenance": provenance(**shapes_model(args.shapes), data=data_record(read)),
                    "shapes": {}}
    sentences, source = benchmark_sentences(args.sentences, args.test_data)
    report["sentences"] = {"source": source, "count": len(sentences), "tokens": sum(map(len, sentences))}
    vocab = [] if args.quick else frequent_tokens(20000, args.train_data)
    with tempfile.TemporaryDirectory() as tmp:
        for shape in args.shapes:
            bilm = published_bilm(shape, Path(tmp))
            optimize_for_inference(bilm, char_cache_size=20000, vocab=vocab or None)
            report["shapes"][shape] = profile_shape(bilm, sentences, args.repeats)
            report["shapes"][shape]["loop"] = "compiled" if compiled.compiled_step() is not None else "Python"
            if compiled.compiled_step() is not None:  # the same model with the timestep loop in Python, op by op
                with dispatch.python_step(), in_place.torch_cells():
                    report.setdefault("python_step", {})[shape] = profile_shape(bilm, sentences, args.repeats)
                report["python_step"][shape]["loop"] = "Python"
    text = markdown(report)
    print(text)
    for path, content in ((args.json, json.dumps(report, indent=2)), (args.markdown, text)):
        if path:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            Path(path).write_text(content, encoding="utf-8")
    return report


def parse_args(argv: Optional[List[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shapes", nargs="+", default=["shipped", "full"])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--sentences", type=int, default=8, help="sentences of 20-30 tokens, run one at a time")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", default=None)
    parser.add_argument("--markdown", default=None)
    parser.add_argument("--quick", action="store_true", help="tiny model, two sentences: a smoke run")
    add_data_options(parser, test=True, train=True)
    args = resolve_data_options(parser.parse_args(argv))
    if args.quick:
        args.shapes, args.sentences, args.repeats = ["tiny"], 2, 1
    return args


def profile_shape(bilm, sentences: List[List[str]], repeats: int) -> Dict:
    """Timed and profiled one-sentence runs of ``bilm``: the split of a timestep's time."""
    config = bilm.config
    tokens = sum(map(len, sentences))
    # LSTM timesteps: positions with <S> and </S>, times layers (a step runs both directions)
    steps = sum(len(s) + 2 for s in sentences) * config.n_layers
    with torch.no_grad():
        for sentence in sentences:  # warm: caches, buffers, MKL's packed weights
            bilm.embed([sentence])
        times = []
        for _ in range(repeats):
            started = time.perf_counter()
            for sentence in sentences:
                bilm.embed([sentence])
            times.append(time.perf_counter() - started)
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            started = time.perf_counter()
            for sentence in sentences:
                bilm.embed([sentence])
            profiled = time.perf_counter() - started
    groups: Dict[str, float] = defaultdict(float)
    calls: Dict[str, int] = defaultdict(int)
    for event in prof.key_averages():
        group = "products" if event.key in PRODUCTS else "elementwise" if event.key in ELEMENTWISE else "other ops"
        groups[group] += event.self_cpu_time_total / 1e6
        calls[group] += event.count
    groups["Python and dispatch"] = max(0.0, profiled - sum(groups.values()))
    best = min(times)
    return {
        "config": {"dim": config.dim, "projection_dim": config.projection_dim, "n_layers": config.n_layers},
        "tokens": tokens,
        "timesteps": steps,
        "tokens_per_s": tokens / best,
        "tokens_per_s_spread": [tokens / max(times), tokens / best],
        "us_per_timestep": best / steps * 1e6,
        "profiled_seconds": profiled,
        "share": {k: v / profiled for k, v in groups.items()},
        "ops_per_timestep": {k: calls[k] / steps for k in calls},
        "top_ops": [
            {"op": e.key, "self_ms": e.self_cpu_time_total / 1e3, "calls": e.count}
            for e in sorted(prof.key_averages(), key=lambda e: -e.self_cpu_time_total)[:10]
        ],
    }


def markdown(report: Dict) -> str:
    p = report["provenance"]
    lines = [
        f"Command: `{report['command']}`",
        "",
        f"Recorded {p['date']} at commit {p['commit']}, on {p['cpu']} ({p['cpu_count']} CPUs; flags: "
        f"{' '.join(p['cpu_flags'])}; torch {p['torch']}, {p['torch_threads']} threads).",
        f"Sentences: {report['sentences']['count']} ({report['sentences']['tokens']} tokens) from "
        f"{report['sentences']['source']}, run one at a time, default inference path (fp32), with the timestep loop compiled where it is available and in Python.",
        "",
        "| model | tokens/s (spread) | us per timestep | products | elementwise | other ops | Python and dispatch | ops per timestep |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    rows = [(s, r) for shape in report["shapes"] for s, r in _loops(report, shape)]
    for shape, r in rows:
        share = r["share"]
        lo, hi = r["tokens_per_s_spread"]
        ops = sum(r["ops_per_timestep"].values())
        cells = [f"{100 * share.get(k, 0.0):.0f}%" for k in ("products", "elementwise", "other ops", "Python and dispatch")]
        cfg = r["config"]
        lines.append(
            f"| {shape} ({cfg['n_layers']}x{cfg['dim']}_{cfg['projection_dim']}), {r.get('loop', 'Python')} loop | {hi:,.0f} ({lo:,.0f}-{hi:,.0f}) | "
            f"{r['us_per_timestep']:.1f} | " + " | ".join(cells) + f" | {ops:.1f} |"
        )
    lines += ["", "Top operators (self time under the profiler):", ""]
    for shape, r in rows:
        top = ", ".join(f"{o['op']} {o['self_ms']:.1f} ms ({o['calls']})" for o in r["top_ops"][:6])
        lines.append(f"- {shape}, {r.get('loop', 'Python')} loop: {top}")
    return "\n".join(lines) + "\n"


def _loops(report: Dict, shape: str):
    """A shape's profiles: the default path's, then the Python loop's where the default is compiled."""
    yield shape, report["shapes"][shape]
    if shape in report.get("python_step", {}):
        yield shape, report["python_step"][shape]


if __name__ == "__main__":
    main()
