"""Markdown tables from a benchmark report (the JSON that bench_bilm / bench_train write)."""
from typing import Dict, List

MODE_NAMES = {
    "baseline": "baseline (original algorithm)",
    "ours": "ours, default fp32",
    "ours_opt": "ours, optimize_for_inference fp32",
    "fp16": "fast: fp16 weights",
    "int8": "fast: dynamic int8",
    "bf16": "fast: bf16",
}
# Targets of issue 7, for the full model.
TARGETS = {"batch_speedup": 2.0, "batch_pct_gemm": 70.0, "single_pct_bandwidth": 70.0,
           "fast_batch_speedup": 3.0, "fast_single_speedup": 5.0, "fast_cosine": 0.999}


def markdown_tables(report: Dict) -> str:
    machine, gemm = report["machine"], report["gemm"]
    lines = [
        f"Command: `{report['command']}`",
        "",
        f"torch {machine['torch']}, {machine['threads']} threads, CPU capability {machine['cpu_capability']} "
        f"({' '.join(machine['cpu_flags']) or 'no flags read'}), quantized engine {machine['quantized_engine']}. "
        f"GEMM peak (torch.mm, same run): {gemm['peak']:.1f} GFLOP/s.",
        f"Sentences: {report['sentences']['count']} ({report['sentences']['tokens']} tokens), "
        f"{report['sentences']['source']}. Char cache: up to {report['cache']['size']} entries, filled with "
        f"{report['cache']['vocab_tokens']} tokens: {report['cache']['vocab_source']}.",
        "",
    ]
    for shape, result in report["shapes"].items():
        mv = result["matvec"]
        flops = result["flops_per_position"]
        lines += [
            f"### {shape}: {result['published_name']}",
            "",
            f"{flops['total'] / 1e6:.0f} MFLOP per position ({flops['lstm'] / 1e6:.0f} without the char-CNN); "
            f"matrix-vector bandwidth over its recurrent weights ({mv['megabytes']:.0f} MB): "
            f"{mv['bandwidth']:.1f} GB/s (row-major {mv['row_major']:.1f}, column-major {mv['column_major']:.1f}).",
            "",
            "| workload | mode | tokens/s | x baseline | GFLOP/s | % GEMM bound | % GEMM bound, LSTM only "
            "| recurrent GB/s | % bandwidth bound | max abs diff vs baseline | cosine to fp32 mean / min |",
            "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
        ]
        for workload in ("batch", "single"):
            entry = result[workload]
            for mode, s in entry["modes"].items():
                diff = s.get("max_abs_diff_vs_baseline")
                lines.append(
                    f"| {workload} | {MODE_NAMES.get(mode, mode)} | {s['tokens_per_s']:.1f} | "
                    f"{s['speedup_vs_baseline']:.2f} | {s['gflops_nominal']:.1f} | {s['pct_gemm_bound']:.0f}% | "
                    f"{s['pct_gemm_bound_lstm_only']:.0f}% | {s['recurrent_gb_per_s']:.1f} | "
                    f"{s['pct_bandwidth_bound']:.0f}% | {'-' if diff is None else f'{diff:.1e}'} | "
                    f"{s['cosine_mean']:.6f} / {s['cosine_min']:.6f} |"
                )
        if result.get("char_cache"):
            c = result["char_cache"]
            lines += ["", f"Char cache after the run: {c['entries']} entries, hit rate {c['hit_rate']:.1%}."]
        lines += ["", *targets(result), ""]
    return "\n".join(lines)


def targets(result: Dict) -> List[str]:
    """The issue's targets, checked against this run's numbers."""
    batch, single = result["batch"]["modes"], result["single"]["modes"]
    best = batch["ours_opt"]
    fast = [m for m in batch if m not in ("baseline", "ours", "ours_opt")]
    rows = [
        ("batch: optimized fp32 >= 2x baseline", best["speedup_vs_baseline"], TARGETS["batch_speedup"], "x"),
        ("batch: optimized fp32 >= 70% of GEMM bound", best["pct_gemm_bound"], TARGETS["batch_pct_gemm"], "%"),
        ("batch: same, LSTM-only bound (char-CNN cached)", best["pct_gemm_bound_lstm_only"],
         TARGETS["batch_pct_gemm"], "%"),
        ("single: optimized fp32 >= 70% of bandwidth bound", single["ours_opt"]["pct_bandwidth_bound"],
         TARGETS["single_pct_bandwidth"], "%"),
    ]
    for mode in fast:
        rows.append((f"batch: {mode} >= 3x baseline", batch[mode]["speedup_vs_baseline"],
                     TARGETS["fast_batch_speedup"], "x"))
        rows.append((f"single: {mode} >= 5x baseline", single[mode]["speedup_vs_baseline"],
                     TARGETS["fast_single_speedup"], "x"))
        worst = min(batch[mode]["cosine_mean"], single[mode]["cosine_mean"])
        rows.append((f"{mode}: mean cosine to fp32 >= 0.999", worst, TARGETS["fast_cosine"], ""))
    out = ["| target | measured | met |", "|---|---:|---|"]
    for label, value, goal, unit in rows:
        shown = f"{value:.1f}{unit}" if unit else f"{value:.6f}"
        out.append(f"| {label} | {shown} | {'yes' if value >= goal else f'no ({value / goal:.0%} of target)'} |")
    return out
