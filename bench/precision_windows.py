"""Training precision on this CPU, as training runs it: fp32 against bf16 autocast in equal windows of
real `finetune` steps, interleaved, with the held-out perplexity each reaches.

    python -m bench.precision_windows --model spacy_elmo/models/en_small --train CORPUS/pretrain/train \\
        --dev CORPUS/pretrain/dev.txt --steps 120 --rounds 2 --work RUNS/precision \\
        --json results/campaign-third/precision/precision-windows.json

`bench.bench_pretrain_step` times single steps of random weights; this runs the command a campaign
stretch runs (`lab/campaign/campaign.sh continue`'s recipe: Adam, 100 warm-up steps to 0.0005, 256
sentences and at most 6,144 tokens a step; in this process, one window after another) from the same
model for the same number of steps, once per precision a round, the order alternating between rounds (the machine is shared and its speed
drifts). Both precisions see the same batches, so their dev perplexities after the window compare
per token. A window's speed is the median of its `metrics.jsonl` train records (tokens/s over each
10 steps; the warm-up's first records and the evaluations are not in them).
"""
import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Dict, List, Optional

from spacy_elmo.records.provenance import data_record, mark_start, model_record, portable_args, provenance
from spacy_elmo.training.config import AUTOCAST_WAS, load_lm_config
from spacy_elmo.training.finetune import finetune

# lab/campaign/campaign.sh continue's recipe, less the run length (training.max_steps here)
RECIPE = {
    "training.optimizer": "adam", "training.learning_rate": 0.0005, "training.warmup_steps": 100,
    "training.batch_size": 256, "training.max_batch_tokens": 6144, "training.eval_frequency": 100000,
    "training.checkpoint_frequency": 100000, "training.max_epochs": 100,
}


def run_window(args: argparse.Namespace, precision: str, round_index: int) -> Dict:
    """One `finetune` window of ``args.steps`` steps at ``precision``; RETURNS (Dict): its numbers."""
    output = args.work / f"round{round_index}-{precision}"
    if output.exists() and any(output.iterdir()):
        raise SystemExit(f"{output} is not empty: give --work a new folder")
    overrides = {
        **RECIPE, "paths.train": str(args.train), "paths.dev": str(args.dev), "training.max_steps": args.steps,
        "training.autocast": AUTOCAST_WAS[precision], "system.threads": args.threads,
    }
    finetune(load_lm_config(Path(args.config), overrides), output, model=str(args.model))
    report = json.loads((output / "finetune-report.json").read_text(encoding="utf-8"))
    records = [json.loads(line) for line in (output / "metrics.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()]
    speeds = [r["tokens_per_s"] for r in records if r.get("kind") == "train" and "tokens_per_s" in r]
    if not speeds:
        raise SystemExit(f"{output}/metrics.jsonl has no train records with tokens_per_s")
    after = report["after_last"]
    return {
        "round": round_index, "precision": precision, "steps": report["steps"], "tokens": report["tokens"],
        "seconds": round(report["seconds"], 1), "tokens_per_s_median": round(statistics.median(speeds), 1),
        "tokens_per_s_range": [round(min(speeds), 1), round(max(speeds), 1)],
        "dev_ppl_before": round(report["before"]["ppl"], 3), "dev_ppl_after": round(after["ppl"], 3),
        "dev_tokens": after["tokens"],
    }


def summary(windows: List[Dict], precisions: List[str]) -> Dict[str, Dict]:
    """Per precision: median tokens/s, its ratio to the first precision round by round, mean dev ppl."""
    base = precisions[0]
    result = {}
    for precision in precisions:
        mine = [w for w in windows if w["precision"] == precision]
        ratios = [w["tokens_per_s_median"] / b["tokens_per_s_median"] for w in mine
                  for b in windows if b["precision"] == base and b["round"] == w["round"]]
        result[precision] = {
            "tokens_per_s": [w["tokens_per_s_median"] for w in mine],
            f"x_{base}_by_round": [round(r, 3) for r in ratios],
            "dev_ppl_after": [w["dev_ppl_after"] for w in mine],
            "dev_ppl_after_mean": round(statistics.fmean(w["dev_ppl_after"] for w in mine), 3),
        }
    return result


def table(record: Dict) -> str:
    lines = [f"# Training precision windows: {record['provenance']['cpu']}", "", f"`{record['provenance']['command']}`", "",
             f"{record['steps']} steps a window from {record['provenance']['model']['name']}, "
             f"{record['threads']} torch thread(s); rounds interleaved, order alternating.", "",
             "| round | precision | tokens | tokens/s (median of 10-step records) | range | dev ppl before | dev ppl after |",
             "|---:|---|---:|---:|---|---:|---:|"]
    for w in record["windows"]:
        low, high = w["tokens_per_s_range"]
        lines.append(f"| {w['round']} | {w['precision']} | {w['tokens']:,} | {w['tokens_per_s_median']:,.0f} | "
                     f"{low:,.0f}-{high:,.0f} | {w['dev_ppl_before']:.2f} | {w['dev_ppl_after']:.2f} |")
    return "\n".join(lines) + "\n"


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, required=True, help="the biLM every window starts from")
    parser.add_argument("--train", type=Path, required=True)
    parser.add_argument("--dev", type=Path, required=True, help="held-out text, scored before and after each window")
    parser.add_argument("--config", default="configs/bilm-small.cfg")
    parser.add_argument("--precisions", default="fp32,bf16", help="comma-separated; the first is the baseline")
    parser.add_argument("--steps", type=int, default=120, help="training steps a window")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--work", type=Path, required=True, help="a new folder for the windows' run folders")
    parser.add_argument("--json", type=Path, required=True, help="the record (a .md table is written beside it)")
    args = parser.parse_args(argv)
    command = "python -m bench.precision_windows " + " ".join(portable_args(sys.argv[1:] if argv is None else argv))
    mark_start(command)
    precisions = args.precisions.split(",")
    windows = []
    for round_index in range(args.rounds):
        order = precisions if round_index % 2 == 0 else precisions[::-1]
        for precision in order:
            windows.append(run_window(args, precision, round_index))
            print(json.dumps(windows[-1]), flush=True)
    record = {
        "steps": args.steps, "threads": args.threads, "recipe": RECIPE, "windows": windows,
        "summary": summary(windows, precisions),
        "provenance": provenance(command, model=model_record(args.model), data=data_record([args.train, args.dev])),
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    args.json.with_suffix(".md").write_text(table(record), encoding="utf-8")
    print(json.dumps(record["summary"], indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
