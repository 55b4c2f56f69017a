"""Markdown tables from a benchmark report (the JSON that bench_bilm writes).

    python -m bench.report results/bench/CPU/bilm.json --markdown results/bench/CPU/bilm.md

rewrites a report's tables from its JSON without running anything again.
"""
import argparse
import json
from pathlib import Path
from typing import Dict, List, Optional, Sequence

MODE_NAMES = {
    "baseline": "baseline (original algorithm)",
    "ours": "ours, default fp32",
    "ours_opt": "ours, optimize_for_inference fp32",
    "ours_opt_pystep": "ours, optimize_for_inference fp32, Python step loop",
    "fp16": "fast: fp16 weights",
    "int8": "fast: dynamic int8",
    "bf16": "fast: bf16",
}
FAST_MODE_NAMES = ("fp16", "int8", "bf16")
# Speed targets, set for the full published model (docs/speed.md).
TARGETS = {
    "batch_speedup": 2.0,
    "batch_pct_gemm": 70.0,
    "single_pct_bandwidth": 70.0,  # of torch's one-row product rate on the same weights (named so in old records)
    "fast_batch_speedup": 3.0,
    "fast_single_speedup": 5.0,
    "fast_cosine": 0.999,
}


def markdown_tables(report: Dict) -> str:
    lines = _header_lines(report)
    for shape, result in report["shapes"].items():
        lines += [f"### {shape}: {result['published_name']}", ""]
        lines += _batch_lines(result, report.get("gemm_shape", []))
        lines += _single_lines(result)
        if result.get("char_cache"):
            c = result["char_cache"]
            lines += ["", f"Char cache after the run: {c['entries']} entries, hit rate {c['hit_rate']:.1%}."]
        if shape == "full":
            lines += ["", *targets(result), ""]
        else:
            lines += ["", "(The speed targets are set for the full model; see docs/speed.md.)", ""]
    return "\n".join(lines)


def _header_lines(report: Dict) -> List[str]:
    """The command, where and when it ran, the machine, and the workload."""
    machine, gemm = report["machine"], report["gemm"]
    return [
        f"Command: `{report['command']}`",
        "",
        *_provenance_lines(report.get("provenance")),
        f"torch {machine['torch']}, {machine['threads']} threads, CPU capability {machine['cpu_capability']} "
        f"({' '.join(machine['cpu_flags']) or 'no flags read'}), quantized engine {machine['quantized_engine']}. "
        f"Short best-case float32 product ({gemm.get('route', 'torch')} route): {gemm['peak']:.1f} GFLOP/s. Optimized fp32 timestep loop: "
        f"{_step_loop(machine)}.",
        f"Sentences: {report['sentences']['count']} ({report['sentences']['tokens']} tokens), "
        f"{report['sentences']['source']}. Char cache: up to {report['cache']['size']} entries, filled with "
        f"{report['cache']['vocab_tokens']} tokens: {report['cache']['vocab_source']}. "
        "Times are the best of the interleaved repeats; the reference rates ran interleaved with them.",
        "",
        *_memory_lines(report),
    ]


def _memory_lines(report: Dict) -> List[str]:
    """The measured memory bandwidth, caches and load (records from before they were measured have none)."""
    memory = report.get("memory")
    if not memory:
        return []
    threads = str(report["machine"]["threads"])
    caches = ", ".join(f"{name} {size // 1024} KiB" for name, size in memory["before"]["caches"].items())
    parts = []
    for when in ("before", "after"):
        if when in memory:
            t = memory[when]["triad_gb_per_s"]
            parts.append(
                f"{when} the run {t[threads]['best']:.1f} GB/s with {threads} threads (median {t[threads]['median']:.1f}, "
                f"min {t[threads]['min']:.1f}), {t['1']['best']:.1f} with 1; load average "
                f"{memory[when]['load_average'][0]:.2f}"
            )
    note = [f"Note: {report['note']}", ""] if report.get("note") else []
    return [
        f"Memory bandwidth (torch triad a = b + s*c over {memory['before']['array_bytes'] >> 20} MiB arrays, "
        f"3 arrays x 8 bytes per element counted): {'; '.join(parts)}. Caches (CPU 0): {caches or 'not read'}.",
        "",
        *note,
    ]


def _batch_lines(result: Dict, gemm_shape: Sequence[int]) -> List[str]:
    """The batch workload of one shape: its table against the GEMM bound, and the work the caches save."""
    flops, batch = result["flops_per_position"], result["batch"]
    lines = [
        f"Batch: {batch['tokens']} tokens ({batch['positions']} positions with <S>, </S>) in one forward pass; "
        f"{flops['total'] / 1e6:.3g} MFLOP per position ({flops['lstm'] / 1e6:.3g} without the char-CNN); "
        f"GEMM bound: {batch['gemm_gflops']:.1f} GFLOP/s (torch.mm at "
        f"{'x'.join(map(str, gemm_shape))}, same run).",
        "",
        "| batch | tokens/s | x baseline | GFLOP/s | % of GEMM bound | % of GEMM bound, LSTM FLOPs only "
        "| % of GEMM bound, FLOPs done | max abs diff vs baseline | cosine to fp32 mean / min |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    lines += [
        _mode_row(
            mode, s, f"{s['gflops_nominal']:.1f}", f"{s['pct_gemm_bound']:.0f}%", f"{s['pct_gemm_bound_lstm_only']:.0f}%",
            _pct(s.get("pct_gemm_bound_work_done")), _diff(s),
        )
        for mode, s in batch["modes"].items()
    ]
    lines += ["", _paired_line(batch, "% of the GEMM bound, LSTM FLOPs only")]
    work = batch.get("work")
    if work:
        lines += [
            "",
            f"Work: the GEMM bound counts {work['nominal_flops'] / 1e9:.2f} GFLOP ({work['positions']} positions through "
            f"the whole model; padding never counts). The optimized modes do {work['done_flops'] / 1e9:.2f} GFLOP: the "
            f"char-CNN runs for {work['uncached_tokens']} of the batch's {work['distinct_tokens']} distinct tokens "
            f"(the rest are in the cache) and the first LSTM layer's input projection once per distinct token; "
            f"the caches and the sharing remove {100 * work['removed_fraction']:.0f}% of the nominal work. "
            "\"FLOPs done\" is the bound for that work: above 100% would mean a miscount.",
        ]
    return lines


def matvec_pct(stats: Dict) -> float:
    """A mode's % of torch's one-row product rate on the same weights (older records: "pct_bandwidth_bound")."""
    return stats["pct_matvec_rate"] if "pct_matvec_rate" in stats else stats["pct_bandwidth_bound"]


def _single_lines(result: Dict) -> List[str]:
    """The one-sentence-at-a-time workload of one shape: its table against torch's one-row product
    rate on the same weights and, where measured, against the floor the memory bandwidth sets."""
    single = result["single"]
    rate = single.get("matvec_rate_gb_per_s", single.get("matvec_gb_per_s"))
    short = result["matvec"].get("rate", result["matvec"].get("bandwidth"))
    floor = single.get("triad_floor")
    lines = [
        "",
        f"One sentence at a time: {single['tokens']} tokens in {single['passes']} "
        f"passes; {result['matvec']['megabytes']:.3g} MB of recurrent weights read per timestep; "
        f"torch matvec rate on these weights: {rate:.1f} GB/s (torch's one-row products on the model's "
        f"weights alone, same run; short best case {short:.1f} GB/s): a reference rate, not a hardware bound.",
    ]
    if floor:
        holds = {
            "memory": "they do not fit in the last-level cache, so this is a floor on the time",
            "L3": "they fit in L3, so this is not a floor (they are read from cache)",
            "L2": "they fit in the L2 caches, so this is not a floor (they are read from cache)",
        }.get(floor["weights_regime"], "cache sizes unknown: whether it is a floor is not known")
        lines.append(
            f"Triad floor: {floor['bytes_per_step'] / 1e6:.3g} MB per timestep at the measured "
            f"{floor['triad_gb_per_s']:.1f} GB/s; {holds}."
        )
    header = "| one sentence | tokens/s | x baseline | recurrent weights GB/s (fp32 bytes) | % of torch matvec rate "
    header += "| % of triad floor " if floor else ""
    lines += [
        "",
        header + "| max abs diff vs baseline | cosine to fp32 mean / min |",
        "|---|---:|---:|---:|---:|" + ("---:|" if floor else "") + "---:|---|",
    ]
    lines += [
        _mode_row(mode, s, f"{s['recurrent_gb_per_s']:.1f}", f"{matvec_pct(s):.0f}%",
                  *([f"{s['pct_triad_floor']:.0f}%"] if floor else []), _diff(s))
        for mode, s in single["modes"].items()
    ]
    lines += ["", _paired_line(single, "% of the torch matvec rate on these weights")]
    return lines


def _mode_row(mode: str, stats: Dict, *cells: str) -> str:
    """A table row: the mode, its tokens/s and speed-up, ``cells``, and its cosine to fp32 (mean / min)."""
    first = [MODE_NAMES.get(mode, mode), f"{stats['tokens_per_s']:.1f}", f"{stats['speedup_vs_baseline']:.2f}"]
    return "| " + " | ".join([*first, *cells, f"{stats['cosine_mean']:.6f} / {stats['cosine_min']:.6f}"]) + " |"


def _provenance_lines(record: Optional[Dict]) -> List[str]:
    if not record:
        return []
    state = f"{record['commit'] or 'no git checkout'}{' with uncommitted changes' if record.get('dirty') else ''}"
    return [f"Recorded {record['date']} at commit {state}, on {record['cpu']} ({record['cpu_count']} CPUs).", ""]


def _step_loop(machine: Dict) -> str:
    if "compiled_step" not in machine:
        return "Python (before the compiled loop existed)"
    return "compiled (C++)" if machine["compiled_step"] else "Python (the compiled loop was not available)"


def _paired_line(workload: Dict, what: str) -> str:
    """The optimized fp32 model's fraction of the bound per repeat (bound timed right after it)."""
    paired = workload["modes"]["ours_opt"].get("pct_bound_paired")
    if not paired:
        return ""
    low, median, high = paired
    return (
        f"Optimized fp32, {what}, repeat by repeat (the reference's time in each repeat over the model's "
        f"time in that repeat): median {median:.0f}%, range {low:.0f}-{high:.0f}%. The tables use the best time of each."
    )


def _pct(value) -> str:
    return "" if value is None else f"{value:.0f}%"


def _diff(stats: Dict) -> str:
    diff = stats.get("max_abs_diff_vs_baseline")
    return "-" if diff is None else f"{diff:.1e}"


def targets(result: Dict) -> List[str]:
    """The speed targets, checked against a report's numbers."""
    batch, single = result["batch"]["modes"], result["single"]["modes"]
    best = batch["ours_opt"]
    fast = [m for m in batch if m in FAST_MODE_NAMES]
    rows = [
        ("batch: optimized fp32 >= 2x baseline", best["speedup_vs_baseline"], TARGETS["batch_speedup"], "x"),
        ("batch: optimized fp32 >= 70% of GEMM bound", best["pct_gemm_bound"], TARGETS["batch_pct_gemm"], "%"),
        (
            "batch: same, bound without char-CNN FLOPs (cached)",
            best["pct_gemm_bound_lstm_only"],
            TARGETS["batch_pct_gemm"],
            "%",
        ),
        (
            "one sentence: optimized fp32 >= 70% of torch's one-row product rate on the same weights",
            matvec_pct(single["ours_opt"]),
            TARGETS["single_pct_bandwidth"],
            "%",
        ),
    ]
    for mode in fast:
        rows.append((f"batch: {mode} >= 3x baseline", batch[mode]["speedup_vs_baseline"], 3.0, "x"))
        rows.append((f"one sentence: {mode} >= 5x baseline", single[mode]["speedup_vs_baseline"], 5.0, "x"))
        worst = min(batch[mode]["cosine_mean"], single[mode]["cosine_mean"])
        rows.append((f"{mode}: mean cosine to fp32 >= 0.999", worst, TARGETS["fast_cosine"], ""))
    out = ["| target | measured | met |", "|---|---:|---|"]
    for label, value, goal, unit in rows:
        shown = f"{value:.1f}{unit}" if unit else f"{value:.6f}"
        out.append(f"| {label} | {shown} | {'yes' if value >= goal else f'no ({value / goal:.0%} of target)'} |")
    return out


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(description="Rewrite a benchmark report's markdown from its JSON.")
    parser.add_argument("report", type=Path, help="the JSON that bench_bilm wrote")
    parser.add_argument("--markdown", type=Path, required=True)
    args = parser.parse_args(argv)
    text = markdown_tables(json.loads(args.report.read_text(encoding="utf-8")))
    args.markdown.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()

