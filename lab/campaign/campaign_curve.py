"""One curve across the stretches of a pretraining campaign: held-out perplexity and the layer probe
at every evaluation, against the tokens and the hours trained since the campaign began.

Each stretch is a run folder that `pretrain` or `finetune` wrote (metrics.jsonl, and
finetune-report.json or pretrain-report.json with the stretch's tokens and seconds), given in the
order they ran; a stretch that continued another's model adds on to it, whatever its own step
count says:

    python -m lab.campaign.campaign_curve RUN1/pretrain RUN2/pretrain --names wide replay \\
        --plot results/campaign-wide-replay/curve.png --records results/campaign-wide-replay/curve.json

A run that was stopped and resumed (`--resume`) into the same folder keeps one metrics.jsonl but
rewrites its report each time: give each part's report file instead of the folder, under one
name, in order. A part covers the steps from where it resumed (the report's `start_step`, else
the step the part before it under the same name ended at) to its `steps`; its tokens and seconds
are that part's only:

    python -m lab.campaign.campaign_curve results/campaign-wide/pretrain \
        RUN/part1-finetune-report.json RUN/part2-finetune-report.json --names wide third third ...

A part that was stopped without writing its report (its process killed) is given as its folder's
metrics file with the steps it covered, ``RUN/metrics.jsonl@START-END``: its tokens are then the
logged rates times the seconds between their records (the first record's interval taken at the
part's mean seconds a step), an estimate where the reports count:

    python -m lab.campaign.campaign_curve RUN/part1-finetune-report.json RUN/metrics.jsonl@96-600 \
        RUN/part3-finetune-report.json --names fourth fourth fourth ...

The perplexities are comparable across stretches only where they were measured on the same dev
text (the records name each stretch's dev file through the runs' own provenance, not here).
"""
import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from spacy_elmo.records.plots import pyplot
from spacy_elmo.records.provenance import data_record, mark_start, portable_args, portable_path, provenance

REPORTS = ("finetune-report.json", "pretrain-report.json")
# a part without a report: its folder's metrics file and the steps it covered
FROM_METRICS = re.compile(r"^(?P<metrics>.*metrics\.jsonl)@(?P<start>\d+)-(?P<end>\d+)$")


def read_stretch(path: Path) -> Dict[str, Any]:
    """A run folder's (or one report file's, or one part's from its metrics) evaluations and totals
    (steps, tokens, seconds)."""
    spec = FROM_METRICS.match(str(path))
    if spec is not None:
        return read_part_from_metrics(Path(spec["metrics"]), int(spec["start"]), int(spec["end"]))
    if path.is_file():
        folder, report = path.parent, path
    else:
        folder = path
        report = next((folder / name for name in REPORTS if (folder / name).is_file()), None)
    metrics = folder / "metrics.jsonl"
    if not metrics.is_file() or report is None:
        raise SystemExit(f"{path}: needs metrics.jsonl and one of {', '.join(REPORTS)} (a finished pretrain or finetune run)")
    records = [json.loads(line) for line in metrics.read_text(encoding="utf-8").splitlines() if line.strip()]
    totals = json.loads(report.read_text(encoding="utf-8"))
    for key in ("steps", "tokens", "seconds"):
        if not isinstance(totals.get(key), (int, float)) or totals[key] <= 0:
            raise SystemExit(f"{report}: no positive {key!r}: the run did not finish a step")
    return {"folder": folder, "report": report, "evals": [r for r in records if r.get("kind") == "eval"], "totals": totals,
            "before": totals.get("before"), "start_step": totals.get("start_step")}


def read_part_from_metrics(metrics: Path, start: int, end: int) -> Dict[str, Any]:
    """A part without a report, from its metrics: steps ``start``-``end``, its tokens and seconds
    estimated from the training records' rates and the seconds between them."""
    if not metrics.is_file():
        raise SystemExit(f"{metrics}: no such metrics file")
    records = [json.loads(line) for line in metrics.read_text(encoding="utf-8").splitlines() if line.strip()]
    train = [r for r in records if r.get("kind") == "train" and start < r.get("step", 0) <= end
             and isinstance(r.get("tokens_per_s"), (int, float)) and isinstance(r.get("time"), (int, float))]
    if len(train) < 2 or train[-1]["step"] != end:
        raise SystemExit(f"{metrics}: steps {start}-{end} need two or more training records with rates and times, "
                         f"the last at step {end}")
    tokens = seconds = 0.0
    for before, after in zip(train, train[1:]):
        interval = after["time"] - before["time"]
        tokens += after["tokens_per_s"] * interval
        seconds += interval
    per_step = seconds / (end - train[0]["step"])
    first = (train[0]["step"] - start) * per_step  # from the part's start to its first record
    tokens += train[0]["tokens_per_s"] * first
    seconds += first
    totals = {"steps": end, "start_step": start, "tokens": round(tokens), "seconds": seconds}
    return {"folder": metrics.parent, "report": metrics, "evals": [r for r in records if r.get("kind") == "eval"],
            "totals": totals, "before": None, "start_step": start}


def start_steps(stretches: List[Dict[str, Any]], names: Sequence[str]) -> List[int]:
    """Where each stretch began: its report's start_step, else where the part before it under the same
    name (the same run, resumed) ended, else 0."""
    starts: List[int] = []
    for i, (name, stretch) in enumerate(zip(names, stretches)):
        start = stretch["start_step"]
        if start is None:
            start = stretches[i - 1]["totals"]["steps"] if i and names[i - 1] == name else 0
        if not 0 <= start < stretch["totals"]["steps"]:
            raise SystemExit(f"{stretch['report']}: starts at step {start} but ends at {stretch['totals']['steps']}: "
                             "give a resumed run's parts in the order they ran, under one name")
        starts.append(int(start))
    return starts


def curve(stretches: List[Dict[str, Any]], names: Sequence[str]) -> List[Dict[str, Any]]:
    """Every evaluation as a point: stretch, step, tokens and hours since the campaign began (each
    stretch's tokens and seconds spread evenly over the steps it ran), dev perplexity and probe
    scores. The first stretch's held-out perplexity before training is the first point."""
    points: List[Dict[str, Any]] = []
    tokens = seconds = 0.0
    for name, stretch, start in zip(names, stretches, start_steps(stretches, names)):
        totals = stretch["totals"]
        ran = totals["steps"] - start
        per_step_tokens, per_step_seconds = totals["tokens"] / ran, totals["seconds"] / ran
        if not points and stretch["before"]:
            points.append({"stretch": name, "step": 0, "tokens": 0, "hours": 0.0, "dev_ppl": stretch["before"].get("ppl"), "probe": None})
        for record in stretch["evals"]:
            if not start < record["step"] <= totals["steps"]:
                continue  # another part's evaluation (or one past this report, from a later part)
            points.append({
                "stretch": name, "step": record["step"],
                "tokens": round(tokens + (record["step"] - start) * per_step_tokens),
                "hours": round((seconds + (record["step"] - start) * per_step_seconds) / 3600, 3),
                "dev_ppl": record.get("dev_ppl", record.get("ppl")),
                "probe": (record.get("probe") or {}).get("scores"),
            })
        tokens += totals["tokens"]
        seconds += totals["seconds"]
    return points


def plot(points: List[Dict[str, Any]], path: Path, *, title: str) -> Optional[Path]:
    plt = pyplot(str(path))
    if plt is None:
        return None
    probed = [p for p in points if p["probe"]]
    fig, axes = plt.subplots(2 if probed else 1, 1, figsize=(7, 8 if probed else 4.5), sharex=True, squeeze=False)
    top = axes[0][0]
    for name in dict.fromkeys(p["stretch"] for p in points):
        mine = [p for p in points if p["stretch"] == name and p["dev_ppl"] is not None]
        if mine:
            top.plot([p["tokens"] / 1e6 for p in mine], [p["dev_ppl"] for p in mine], "o-", label=name)
    top.set_ylabel("held-out perplexity")
    top.set_title(title)
    top.grid(True, alpha=0.3)
    top.legend()
    if probed:
        below = axes[1][0]
        for row in ("layer 0", "layer 1", "layer 2", "mean"):
            rows = [p for p in probed if row in p["probe"]]
            if rows:
                below.plot([p["tokens"] / 1e6 for p in rows], [p["probe"][row] for p in rows], "o-", label=row, linewidth=1)
        below.set_ylabel("UPOS probe accuracy (%)")
        below.grid(True, alpha=0.3)
        below.legend(fontsize=8)
    axes[-1][0].set_xlabel("tokens trained since the campaign began (millions)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("stretches", nargs="+", type=Path,
                        help="run folders, or a resumed run's report files one per part, in the order they ran")
    parser.add_argument("--names", nargs="+", help="a name for each stretch (default: its folder's parent)")
    parser.add_argument("--plot", type=Path, help="PNG to write (needs matplotlib)")
    parser.add_argument("--records", type=Path, required=True, help="JSON to write: every point, with provenance")
    parser.add_argument("--title", default="Continued pretraining, stretch by stretch")
    args = parser.parse_args(argv)
    command = "python -m lab.campaign.campaign_curve " + " ".join(portable_args(sys.argv[1:] if argv is None else argv))
    mark_start(command)
    names = args.names or [(path.parent if path.is_file() else path).parent.name for path in args.stretches]
    if len(names) != len(args.stretches):
        parser.error(f"{len(args.stretches)} stretches but {len(names)} names")
    stretches = [read_stretch(folder) for folder in args.stretches]
    points = curve(stretches, names)
    if args.plot is not None:
        plot(points, args.plot, title=args.title)
    files = list(dict.fromkeys(f for s in stretches for f in (s["folder"] / "metrics.jsonl", s["report"])))
    record = {
        "stretches": [{"name": n, "folder": portable_path(s["folder"]), "report": s["report"].name, "start_step": start,
                       **{k: s["totals"][k] for k in ("steps", "tokens", "seconds")}}
                      for n, s, start in zip(names, stretches, start_steps(stretches, names))],
        "points": points,
        "provenance": provenance(command, model=None, model_note="read from the runs' metrics; each run's model is named by its own records",
                                 data=data_record(files)),
    }
    args.records.parent.mkdir(parents=True, exist_ok=True)
    args.records.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    for point in points:
        probe = point["probe"] or {}
        print(f"{point['stretch']:>10} step {point['step']:>5} | {point['tokens'] / 1e6:6.2f}M tokens | {point['hours']:5.2f} h | "
              f"dev ppl {point['dev_ppl']:.1f}" + (f" | probe layer 1 {probe['layer 1']:.1f}" if "layer 1" in probe else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
