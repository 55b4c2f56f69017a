"""One benchmark on two revisions of the code, interleaved process by process: the ratio of a metric.

    python -m bench.ab_revisions --base 3dea5d1 --new 0d79ac9 --rounds 4 \\
        --metric rows.0.tokens_per_s_median --json results/bench/CPU/pretrain-step-ab.json -- \\
        bench.bench_pretrain_step --text corpus/full/pretrain/dev.txt --precisions fp32 --rounds 2

Each revision is checked out into a temporary git worktree; each round runs the benchmark module
once from each (in alternating order), in a fresh process that imports spacy_elmo and bench from
that worktree (checked), with ``--json FILE`` appended; the metric is read from that JSON by a dotted
path (list indices as numbers). The report gives each revision's values and, round by round, the
new revision's metric over the base's (so a tokens/s ratio above 1 means faster). Relative paths
in the benchmark's arguments are resolved against this checkout before the runs.
"""
import argparse
import json
import shlex
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict, List, Optional

from spacy_elmo.records.provenance import data_record, mark_start, portable_args, provenance

from lab.records.gather import gathered

HERE = Path(__file__).resolve().parent.parent
CHILD = (
    "import runpy, sys; import spacy_elmo, bench; root = sys.argv[1];"
    "assert spacy_elmo.__file__.startswith(root) and bench.__file__.startswith(root), (spacy_elmo.__file__, bench.__file__);"
    "sys.argv = sys.argv[2:]; runpy.run_module(sys.argv[0], run_name='__main__')"
)


def main(argv: Optional[List[str]] = None) -> Dict:
    args = parse_args(argv)
    command = shlex.join(["python", "-m", "bench.ab_revisions", *portable_args(sys.argv[1:] if argv is None else argv)])
    mark_start(command)
    repo = Path(args.repo).resolve()
    bench_args = [_absolute(a) for a in args.bench[1:]]
    values: Dict[str, List[float]] = {"base": [], "new": []}
    records: List[Dict] = []  # the runs' own provenance records
    with tempfile.TemporaryDirectory(prefix="ab-") as tmp:
        trees = {side: _worktree(repo, getattr(args, side), Path(tmp) / side) for side in ("base", "new")}
        try:
            for round_ in range(args.rounds):
                order = ("base", "new") if round_ % 2 == 0 else ("new", "base")
                for side in order:
                    out = Path(tmp) / f"{side}-{round_}.json"
                    child = [sys.executable, "-c", CHILD, str(trees[side]), args.bench[0], *bench_args, "--json", str(out)]
                    subprocess.run(child, cwd=trees[side], check=True, stdout=subprocess.DEVNULL)
                    written = json.loads(out.read_text(encoding="utf-8"))
                    values[side].append(metric(written, args.metric))
                    records.append(written.get("provenance", {}))
                    print(f"round {round_}: {side} {values[side][-1]:.4g}", file=sys.stderr, flush=True)
        finally:
            for tree in trees.values():
                subprocess.run(["git", "-C", str(repo), "worktree", "remove", "--force", str(tree)], check=False)
    ratios = [n / b for n, b in zip(values["new"], values["base"])]
    # the model: every distinct one the runs recorded; the data: the files the arguments name, and
    # any other the runs recorded (a run at an old revision may record neither: check_record says so)
    runs = gathered(records)
    named = data_record([a for a in bench_args if not a.startswith("-") and Path(a).is_file()])
    runs["data"] = {**named, **{k: v for k, v in runs.get("data", {}).items() if v not in named.values()}}
    if not runs["data"] and not runs.get("data_note"):
        runs["data_note"] = "the benchmark's arguments name no data file and its runs recorded none"
    report = {
        "command": command,
        "provenance": provenance(**runs),
        "base": _describe(repo, args.base),
        "new": _describe(repo, args.new),
        "benchmark": shlex.join(["python", "-m", args.bench[0], *portable_args(args.bench[1:])]),
        "metric": args.metric,
        "values": values,
        "ratios": ratios,
        "ratio_median": statistics.median(ratios),
        "ratio_range": [min(ratios), max(ratios)],
    }
    text = markdown(report)
    print(text)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(report, indent=2), encoding="utf-8")
        Path(args.json).with_suffix(".md").write_text(text, encoding="utf-8")
    return report


def parse_args(argv: Optional[List[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", required=True, help="the baseline revision (any git revision)")
    parser.add_argument("--new", required=True, help="the revision to compare with it")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--metric", required=True, help="dotted path into the benchmark's JSON, e.g. rows.0.tokens_per_s_median")
    parser.add_argument("--json", default=None, help="write the report here (and its markdown beside it)")
    parser.add_argument("--repo", default=str(HERE), help="the git repository of the revisions (default: this checkout)")
    parser.add_argument("bench", nargs=argparse.REMAINDER, help="-- MODULE ARGS: the benchmark and its arguments")
    args = parser.parse_args(argv)
    if args.bench and args.bench[0] == "--":
        args.bench = args.bench[1:]
    if not args.bench:
        parser.error("give the benchmark after --: MODULE [ARGS]")
    return args


def metric(report: Dict, path: str) -> float:
    """The value at a dotted path (list indices as numbers) of a benchmark's JSON."""
    value = report
    for part in path.split("."):
        value = value[int(part)] if isinstance(value, list) else value[part]
    return float(value)


def _absolute(arg: str) -> str:
    """An argument that names an existing path relative to this checkout, made absolute."""
    candidate = HERE / arg
    return str(candidate) if not arg.startswith("-") and not Path(arg).is_absolute() and candidate.exists() else arg


def _worktree(repo: Path, revision: str, path: Path) -> Path:
    subprocess.run(["git", "-C", str(repo), "worktree", "add", "--detach", str(path), revision], check=True,
                   capture_output=True)
    return path


def _describe(repo: Path, revision: str) -> Dict[str, str]:
    commit = subprocess.run(["git", "-C", str(repo), "rev-parse", revision], capture_output=True, text=True, check=True)
    subject = subprocess.run(["git", "-C", str(repo), "log", "-1", "--format=%s", revision], capture_output=True, text=True)
    return {"revision": revision, "commit": commit.stdout.strip(), "subject": subject.stdout.strip()[:200]}


def markdown(report: Dict) -> str:
    p = report["provenance"]
    lines = [
        f"Command: `{report['command']}`",
        "",
        f"Recorded {p['date']} on {p['cpu']} ({p['cpu_count']} CPUs; flags: {' '.join(p['cpu_flags'])}; "
        f"torch {p['torch']}).",
        f"Benchmark: `{report['benchmark']}`, metric `{report['metric']}`, one process per revision per round, "
        "alternating which goes first.",
        "",
        f"- base: {report['base']['commit'][:10]} ({report['base']['subject']})",
        f"- new: {report['new']['commit'][:10]} ({report['new']['subject']})",
        "",
        "| round | base | new | new / base |",
        "|---:|---:|---:|---:|",
    ]
    for i, (b, n, r) in enumerate(zip(report["values"]["base"], report["values"]["new"], report["ratios"])):
        lines.append(f"| {i} | {b:,.1f} | {n:,.1f} | {r:.3f} |")
    low, high = report["ratio_range"]
    lines += ["", f"new / base: median {report['ratio_median']:.3f}, range {low:.3f}-{high:.3f}."]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
