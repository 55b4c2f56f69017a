"""The campaigns' tables and plots from the metrics that lab/campaign/run_experiment.py wrote: one
experiment's table and plot (``spacy_elmo.downstream.report``), variants and repeated seeds compared.

    python -m lab.campaign.report_results training/sample/metrics --table results/sample.md --plot results/sample.png \
        --records results/sample-metrics.json

--records also writes every run's metrics (what run_experiment.py recorded for each cell of the
table) in one JSON file, so the table can be checked against them. Its top-level provenance is the
report's (command, start commit, machine, date) with the union of the runs' biLMs (a list: each
distinct model a run used) and of the data files they read; each run keeps its own record.

Variants of the same runs (other config overrides, each run_experiment.py --output a folder of its
own) are compared by the dev score that chose each model-best and by the test score:

    python -m lab.campaign.report_results input=runs/input/metrics both=runs/both/metrics --table T.md

Repeated runs of the same cells (run_experiment.py --system.seed N, each seed a folder of its own)
are compared model by model with --seeds: every seed's test score, their mean and range, and the
mean gain over the plain runs of --plain:

    python -m lab.campaign.report_results --seeds 0.6.0=s0/metrics,s1/metrics cand=c0/metrics,c1/metrics \
        --plain runs/full/metrics --table T.md --plot T.png --records T.json

A model's runs, and the plain runs, are metrics folders, a report's --records file (its plain runs),
or ``FILE#NAME``: the runs a --seeds report's --records FILE kept for model NAME, one run a seed
(``system.seed`` of each run's overrides, 0 where it has none), so that a model measured before is
compared with its recorded runs. --plain takes several, comma-separated, like a model: the gain is
then over the plain runs' mean, and the table has a row of them.
"""
import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from spacy_elmo.downstream.report import TASK_TITLES, Records, load_records, markdown_table, plot, save_figure
from spacy_elmo.records.plots import pyplot
from spacy_elmo.records.provenance import command_line, mark_start, provenance

from lab.records.gather import gathered

def variants_table(variants: Dict[str, Records], *, title: str = "") -> str:
    """One row per task, training fraction, setting and variant (in the order given): dev score
    (what chose model-best, and what a variant should be chosen on) and test score."""
    header = ["task", "train %", "setting", "variant", "dev", "test"]
    lines = [f"### {title}\n" if title else "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    keys = sorted({k for records in variants.values() for k in records}, key=lambda k: (list(TASK_TITLES).index(k[0]), k[1:]))
    for task, pct, setting in keys:
        for name, records in variants.items():
            record = records.get((task, pct, setting))
            if record is None:
                continue
            dev = record.get("dev_score")
            cells = [task, str(pct), setting, name, "-" if dev is None else f"{100 * dev:.2f}", f"{100 * record['score']:.2f}"]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(line for line in lines if line) + "\n"


def _shared_cells(models: Dict[str, List[Records]]) -> set:
    """The (task, fraction, setting) cells, plain runs aside, that every model has a run of."""
    cells = [{k for records in runs for k in records if k[2] != "plain"} for runs in models.values()]
    return set.intersection(*cells) if cells else set()


def expand_runs(spec: str) -> List[Records]:
    """The runs ``spec`` names: a metrics folder or a --records file (one set of runs), or ``FILE#NAME``,
    the runs a --seeds report's FILE kept for model NAME, one set of runs a seed, in seed order."""
    path, sep, name = spec.partition("#")
    if not sep:
        return [load_records(Path(spec))]
    by_seed: Dict[int, Records] = defaultdict(dict)
    for run in json.loads(Path(path).read_text(encoding="utf-8")).get("runs", []):
        if run.get("model") == name:
            seed = int(run.get("overrides", {}).get("system.seed", 0))
            by_seed[seed][(run["task"], run["fraction_pct"], run["setting"])] = run
    if not by_seed:
        raise ValueError(f"{path} keeps no runs of a model named {name!r}")
    return [by_seed[seed] for seed in sorted(by_seed)]


def seeds_table(models: Dict[str, List[Records]], *, plain: Optional[List[Records]] = None, title: str = "") -> str:
    """One row per task, training fraction and model (in the order given), for the cells every model
    has runs of: each run's test score (one run a seed; a folder holds one run of each cell it has),
    their mean and range, and the mean minus the mean of the plain runs where ``plain`` has the
    cell; a last row per cell gives those plain runs."""
    keys = sorted(_shared_cells(models), key=lambda k: (list(TASK_TITLES).index(k[0]), k[1:]))
    header = ["task", "train %", "model", "runs", "test scores", "mean", "range"] + (["mean - plain"] if plain else [])
    lines = [f"### {title}\n" if title else "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for task, pct, setting in keys:
        for name, runs in models.items():
            scores = [100 * records[(task, pct, setting)]["score"] for records in runs if (task, pct, setting) in records]
            if not scores:
                continue
            mean = sum(scores) / len(scores)
            cells = [task, str(pct), name, str(len(scores)), ", ".join(f"{x:.2f}" for x in scores), f"{mean:.2f}",
                     f"{max(scores) - min(scores):.2f}"]
            if plain:
                base = _plain_scores(plain, task, pct)
                cells.append(f"{mean - sum(base) / len(base):+.2f}" if base else "-")
            lines.append("| " + " | ".join(cells) + " |")
        base = _plain_scores(plain or [], task, pct)
        if base:
            lines.append("| " + " | ".join([task, str(pct), "plain", str(len(base)), ", ".join(f"{x:.2f}" for x in base),
                                            f"{sum(base) / len(base):.2f}", f"{max(base) - min(base):.2f}", ""]) + " |")
    return "\n".join(line for line in lines if line) + "\n"


def _plain_scores(plain: List[Records], task: str, pct: int) -> List[float]:
    return [100 * records[(task, pct, "plain")]["score"] for records in plain if (task, pct, "plain") in records]


def plot_seeds(models: Dict[str, List[Records]], path: Path, *, title: str = "") -> Optional[Path]:
    """Each run's test score as a point and the mean as a bar, one panel per task and fraction."""
    plt = pyplot(str(path))
    if plt is None:
        return None
    cells = sorted({(t, p) for t, p, _ in _shared_cells(models)}, key=lambda k: (list(TASK_TITLES).index(k[0]), k[1]))
    fig, axes = plt.subplots(1, len(cells), figsize=(4 * len(cells), 4), squeeze=False)
    for ax, (task, pct) in zip(axes[0], cells):
        for i, (name, runs) in enumerate(models.items()):
            scores = [100 * r[k]["score"] for r in runs for k in r if k[:2] == (task, pct) and k[2] != "plain"]
            if scores:
                ax.bar(i, sum(scores) / len(scores), color="C%d" % i, alpha=0.4)
                ax.plot([i] * len(scores), scores, "o", color="C%d" % i)
        ax.set_xticks(range(len(models)))
        ax.set_xticklabels(list(models))
        ax.set_ylabel("test score")
        ax.set_title(f"{TASK_TITLES[task]}, {pct}% of train")
        low = min(100 * r[k]["score"] for runs in models.values() for r in runs for k in r if k[:2] == (task, pct))
        ax.set_ylim(bottom=max(0.0, low - 5))
        ax.grid(True, axis="y", alpha=0.3)
    return save_figure(plt, fig, path, title)


def runs_union(runs: List[dict]) -> Dict[str, Any]:
    """The model and data of the report's record: every distinct biLM its runs used and every data
    file they read (``spacy_elmo.records.provenance.gathered``). A run recorded without them (written before
    runs named their model and data) leaves the field out, with a warning: the record then fails
    ``check_record`` until the run is redone."""
    lacking = [f"{run['task']} {run['setting']} {run['fraction_pct']}%" for run in runs
               if not {"model", "data"} <= set(run.get("provenance", {}))]
    if lacking:
        print(f"warning: runs recorded without their model and data: {', '.join(lacking)}", file=sys.stderr)
    return gathered([run.get("provenance", {}) for run in runs])


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "metrics", nargs="*", help="folder of metrics JSON files, or NAME=FOLDER pairs: variants to compare by dev and test score"
    )
    parser.add_argument("--table", type=Path, required=True, help="markdown file to write")
    parser.add_argument("--plot", type=Path, help="PNG file to write (needs matplotlib: the plot extra)")
    parser.add_argument("--title", default="", help="heading of the table and the plot")
    parser.add_argument("--records", type=Path, default=None, help="also write every run's metrics here (JSON)")
    parser.add_argument("--seeds", nargs="+", metavar="NAME=FOLDER,FOLDER", help="models to compare over repeated runs")
    parser.add_argument("--plain", help="with --seeds: the plain runs the gains are over (metrics folders, --records files or FILE#NAME, comma-separated)")
    args = parser.parse_args(argv)
    mark_start()
    if args.seeds:
        if args.metrics:
            parser.error("--seeds takes the place of the metrics folders")
        pairs = [m.partition("=") for m in args.seeds]
        if any(not sep or not name or not folders for name, sep, folders in pairs) or len({n for n, _, _ in pairs}) < len(pairs):
            parser.error("--seeds: give every model as NAME=FOLDER[,FOLDER...], each NAME once")
        models = {name: [runs for spec in folders.split(",") for runs in expand_runs(spec)] for name, _, folders in pairs}
        plain = [runs for spec in args.plain.split(",") for runs in expand_runs(spec)] if args.plain else None
        table = seeds_table(models, plain=plain, title=args.title)
        shared = _shared_cells(models)
        runs = [dict(records[key], model=name, run=i) for name, runs_ in models.items() for i, records in enumerate(runs_)
                for key in sorted(records) if key in shared]
        if plain:
            runs += [dict(records[key], model="plain", run=i) for i, records in enumerate(plain)
                     for key in sorted(records) if key[2] == "plain"]
        if args.plot is not None:
            plot_seeds(models, args.plot, title=args.title)
    elif not args.metrics:
        parser.error("give a metrics folder, NAME=FOLDER pairs, or --seeds")
    elif any("=" in m for m in args.metrics):
        pairs = [m.partition("=") for m in args.metrics]
        if any(not sep or not name for name, sep, _ in pairs) or len({name for name, _, _ in pairs}) < len(pairs):
            parser.error("to compare variants give every folder as NAME=FOLDER, each NAME once")
        variants = {name: load_records(Path(folder)) for name, _, folder in pairs}
        table = variants_table(variants, title=args.title)
        runs = [dict(records[key], variant=name) for name, records in variants.items() for key in sorted(records)]
    elif len(args.metrics) > 1:
        parser.error("one metrics folder, or NAME=FOLDER pairs to compare variants")
    else:
        records = load_records(Path(args.metrics[0]))
        table = markdown_table(records, title=args.title)
        runs = [records[key] for key in sorted(records)]
        if args.plot is not None:
            plot(records, args.plot, title=args.title)
    args.table.parent.mkdir(parents=True, exist_ok=True)
    args.table.write_text(table, encoding="utf-8")
    if args.records is not None:
        command = None if argv is None else command_line([sys.argv[0], *argv], module=__spec__.name)
        args.records.parent.mkdir(parents=True, exist_ok=True)
        written = {"provenance": provenance(command, **runs_union(runs)), "runs": runs}
        args.records.write_text(json.dumps(written, indent=2) + "\n", encoding="utf-8")
    print(table)


if __name__ == "__main__":
    main()
