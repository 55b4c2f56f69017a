"""Is bf16 training safe for quality? Two continuations of the same model on the same text for the
same steps, one in float32 and one under bf16 autocast, compared by their held-out perplexity curves.

Each run is a folder `finetune` (or `pretrain`) wrote (metrics.jsonl and its report), made by the
campaign's own command with only the precision changed, e.g.

    RUN=runs/fp32 lab/campaign/campaign.sh continue 300m --training.max_steps 1100
    RUN=runs/bf16 lab/campaign/campaign.sh continue 300m --training.max_steps 1100 --training.autocast bf16
    python -m lab.campaign.precision_compare --fp32 runs/fp32/pretrain --bf16 runs/bf16/pretrain \\
        --json results/campaign-fourth/precision/compare.json --plot results/campaign-fourth/precision/compare.png

The record holds both curves (held-out perplexity at every evaluation, and before training), each
run's steps, tokens and training rate, and the answer: bf16 is used for a longer run only where its
final held-out perplexity is within ``--tolerance`` (1%) of float32's. The rates are those of the
two runs as they ran (side by side, one thread each, on a shared machine); the step's speed is
``bench.bench_pretrain_step``'s to measure.
"""
import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from spacy_elmo.files import write_atomic
from spacy_elmo.records.plots import pyplot
from spacy_elmo.records.provenance import data_record, mark_start, portable_args, portable_path, provenance

from .campaign_curve import read_stretch

PRECISIONS = ("fp32", "bf16")


def summarize(folder: Path) -> Dict[str, Any]:
    """One run: its held-out curve (the report's "before" at step 0, then every evaluation), totals,
    and the median rate of its 10-step training records."""
    stretch = read_stretch(folder)
    totals = stretch["totals"]
    curve: List[Dict[str, Any]] = []
    if stretch["before"]:
        curve.append({"step": 0, "dev_ppl": stretch["before"]["ppl"]})
    curve += [{"step": r["step"], "dev_ppl": r.get("dev_ppl", r.get("ppl"))} for r in stretch["evals"]]
    rows = [json.loads(line) for line in (folder / "metrics.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()]
    rates = [r["tokens_per_s"] for r in rows if r.get("kind") == "train" and r.get("tokens_per_s")]
    losses = {r["step"]: r["loss"] for r in rows if r.get("kind") == "train"}
    return {
        "folder": portable_path(folder), "steps": totals["steps"], "tokens": totals["tokens"],
        "seconds": round(totals["seconds"], 1), "tokens_per_s_median": round(statistics.median(rates), 1) if rates else None,
        "curve": curve, "final_dev_ppl": curve[-1]["dev_ppl"] if curve else None, "train_loss": losses,
        "weights_sha256": totals.get("weights_sha256"), "run_provenance": totals.get("provenance"),
    }


def compare(runs: Dict[str, Dict[str, Any]], tolerance: float) -> Dict[str, Any]:
    """The verdict: bf16's final held-out perplexity against float32's, and the curves point by point."""
    fp32, bf16 = runs["fp32"], runs["bf16"]
    if fp32["steps"] != bf16["steps"]:
        raise SystemExit(f"the runs trained different steps (fp32 {fp32['steps']}, bf16 {bf16['steps']}): not comparable")
    if not fp32["curve"] or not bf16["curve"]:
        raise SystemExit("a run has no held-out evaluation: nothing to compare")
    at_steps = {p["step"]: p["dev_ppl"] for p in bf16["curve"]}
    points = [{"step": p["step"], "fp32": p["dev_ppl"], "bf16": at_steps[p["step"]],
               "bf16_over_fp32": round(at_steps[p["step"]] / p["dev_ppl"], 5)}
              for p in fp32["curve"] if p["step"] in at_steps]
    shared = sorted(set(fp32["train_loss"]) & set(bf16["train_loss"]))
    loss_gap = max((abs(bf16["train_loss"][s] - fp32["train_loss"][s]) for s in shared), default=None)
    ratio = bf16["final_dev_ppl"] / fp32["final_dev_ppl"]
    return {
        "points": points, "final_ratio": round(ratio, 5), "final_difference_pct": round(100 * (ratio - 1), 3),
        "tolerance_pct": round(100 * tolerance, 3), "bf16_safe": ratio <= 1 + tolerance,
        "max_train_loss_gap": None if loss_gap is None else round(loss_gap, 5), "train_loss_steps_compared": len(shared),
        "choice": "bf16" if ratio <= 1 + tolerance else "fp32",
    }


def plot(runs: Dict[str, Dict[str, Any]], path: Path, verdict: Dict[str, Any]) -> Optional[Path]:
    plt = pyplot(str(path))
    if plt is None:
        return None
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name in PRECISIONS:
        run = runs[name]
        per_step = run["tokens"] / run["steps"]
        ax.plot([p["step"] * per_step / 1e6 for p in run["curve"]], [p["dev_ppl"] for p in run["curve"]], "o-", label=name)
    ax.set_xlabel("tokens trained (millions)")
    ax.set_ylabel("held-out perplexity")
    ax.set_title(f"The same continuation in float32 and bf16: bf16 ends {verdict['final_difference_pct']:+.2f}%")
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main(argv: Optional[Sequence[str]] = None) -> Dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fp32", type=Path, required=True, help="the float32 run's folder")
    parser.add_argument("--bf16", type=Path, required=True, help="the bf16 run's folder")
    parser.add_argument("--json", type=Path, required=True, help="the record to write")
    parser.add_argument("--plot", type=Path, help="PNG of both curves (needs matplotlib)")
    parser.add_argument("--tolerance", type=float, default=0.01, help="bf16's final perplexity may exceed fp32's by this share")
    args = parser.parse_args(argv)
    mark_start("python -m lab.campaign.precision_compare " + " ".join(portable_args(sys.argv[1:] if argv is None else argv)))
    runs = {"fp32": summarize(args.fp32), "bf16": summarize(args.bf16)}
    verdict = compare(runs, args.tolerance)
    record: Dict[str, Any] = {"runs": runs, **verdict}
    if args.plot is not None and plot(runs, args.plot, verdict) is not None:
        record["plot"] = portable_path(args.plot)
    files = [folder / name for folder in (args.fp32, args.bf16) for name in ("metrics.jsonl",)]
    record["provenance"] = provenance(model=None, model_note="reads two training runs' records; each names its model",
                                      data=data_record(files))
    args.json.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(args.json, (json.dumps(record, indent=1) + "\n").encode("utf-8"))
    print(f"final held-out perplexity: fp32 {runs['fp32']['final_dev_ppl']:.3f}, bf16 {runs['bf16']['final_dev_ppl']:.3f} "
          f"({verdict['final_difference_pct']:+.3f}%): {verdict['choice']}")
    return record


if __name__ == "__main__":
    main()
