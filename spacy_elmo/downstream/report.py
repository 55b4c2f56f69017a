"""The downstream experiment's markdown table and PNG plot, from the metrics ``runs.run_cells`` wrote.

``write_report`` also writes every run's metrics in one JSON file (each run keeps its own record of
what made it), so that the table can be checked against them.
"""
import json
from collections import defaultdict
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from ..records.plots import pyplot
from ..records.provenance import provenance

TASK_TITLES = {"upos": "UPOS tagging (accuracy)", "ner": "NER (entity F1)", "textcat": "Sentiment (accuracy)"}
SETTING_TITLES = {"plain": "without ELMo", "elmo": "with ELMo"}
# tasks with more than one row in the table: (row name, key in record["scores"] or None for "score")
TASK_ROWS = {"textcat": (("textcat accuracy", None), ("textcat macro F1", "cats_macro_f"))}

# a score without ELMo under this (a fraction) puts a note under the table: the baseline barely works
LOW_BASELINE = 0.10

# (task, fraction_pct, setting) -> record
Records = Dict[Tuple[str, int, str], dict]


def load_records(metrics_dir: Path) -> Records:
    """The runs of a metrics folder (``runs.run_cells``'), or of a records file a report wrote."""
    records = {}
    if Path(metrics_dir).is_file():
        found = json.loads(Path(metrics_dir).read_text(encoding="utf-8")).get("runs", [])
    else:
        found = [json.loads(path.read_text(encoding="utf-8")) for path in sorted(Path(metrics_dir).glob("*.json"))]
    for record in found:
        records[(record["task"], record["fraction_pct"], record["setting"])] = record
    if not records:
        raise ValueError(f"no metrics (*.json) in {metrics_dir}: run the downstream experiment first (downstream-train)")
    return records


def markdown_table(records: Records, *, title: str = "") -> str:
    """One row per task (and metric: TASK_ROWS) and training fraction: sentences, score of each
    setting, ELMo minus plain."""
    settings = sorted({s for _, _, s in records}, key=lambda s: list(SETTING_TITLES).index(s))
    header = ["task", "train %", "train sentences"] + [SETTING_TITLES[s] for s in settings]
    if {"plain", "elmo"} <= set(settings):
        header.append("ELMo - plain")
    lines = [f"### {title}\n" if title else "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for task in sorted({t for t, _, _ in records}, key=list(TASK_TITLES).index):
        for row_name, key in TASK_ROWS.get(task, ((task, None),)):
            for pct in sorted({p for t, p, _ in records if t == task}):
                row_records = {s: records.get((task, pct, s)) for s in settings}
                sentences = next(r["train_sentences"] for r in row_records.values() if r is not None)
                scores = {s: score(r, key) for s, r in row_records.items()}
                cells = [row_name, str(pct), f"{sentences:,}"]
                cells += [f"{100 * v:.2f}" if v is not None else "-" for v in scores.values()]
                if "ELMo - plain" in header:
                    plain, elmo = scores["plain"], scores["elmo"]
                    cells.append(f"{100 * (elmo - plain):+.2f}" if plain is not None and elmo is not None else "-")
                lines.append("| " + " | ".join(cells) + " |")
    notes = low_baseline_notes(records)
    return "\n".join(line for line in lines if line) + "\n" + "".join(f"\n{note}\n" for note in notes)


def low_baseline_notes(records: Records, *, below: float = LOW_BASELINE) -> List[str]:
    """A sentence for each task whose score without ELMo is under ``below`` at some fraction: there
    the difference is a few correct predictions over a model that barely works, not a gain of the
    kind the other rows show."""
    notes = []
    for task in sorted({t for t, _, _ in records}, key=list(TASK_TITLES).index):
        plain = {p: r["score"] for (t, p, s), r in sorted(records.items()) if t == task and s == "plain"}
        if plain and min(plain.values()) < below:
            scores = " / ".join(f"{100 * v:.2f}" for v in plain.values())
            fractions = " / ".join(f"{p}%" for p in plain)
            notes.append(
                f"**{task}: near-zero baseline.** Without ELMo it scores {scores} at {fractions} of train:"
                " that model barely works, so each difference is a few correct predictions more than almost"
                " none, not a gain over a working baseline."
            )
    return notes


def save_figure(plt, fig, path: Path, title: str) -> Path:
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def score(record: Optional[dict], key: Optional[str]) -> Optional[float]:
    if record is None:
        return None
    return record["scores"][key] if key else record["score"]


def plot(records: Records, path: Path, *, title: str = "") -> Optional[Path]:
    """Score against training fraction (log scale), one panel per task, one curve per setting.

    RETURNS None (after one line on stderr) when matplotlib, the ``plot`` extra, is not installed.
    """
    plt = pyplot(str(path))
    if plt is None:
        return None
    curves: Dict[str, Dict[str, List[Tuple[int, float]]]] = defaultdict(lambda: defaultdict(list))
    for (task, pct, setting), record in sorted(records.items()):
        curves[task][setting].append((pct, 100 * record["score"]))
    tasks = [t for t in TASK_TITLES if t in curves]
    fig, axes = plt.subplots(1, len(tasks), figsize=(5 * len(tasks), 4), squeeze=False)
    for ax, task in zip(axes[0], tasks):
        for setting in [s for s in SETTING_TITLES if s in curves[task]]:
            xs, ys = zip(*sorted(curves[task][setting]))
            ax.plot(xs, ys, marker="o", label=SETTING_TITLES[setting])
        ax.set_xscale("log")
        ax.set_xticks(sorted({p for p, _ in sum(curves[task].values(), [])}))
        ax.set_xticklabels([f"{p}%" for p in ax.get_xticks()])
        ax.set_xlabel("share of the training set")
        ax.set_ylabel("test score")
        ax.set_title(TASK_TITLES[task])
        ax.grid(True, alpha=0.3)
        ax.legend()
    return save_figure(plt, fig, path, title)


def write_report(
    metrics_dir: Path, table: Path, *, plot_path: Optional[Path] = None, records: Optional[Path] = None,
    title: str = "", command: Optional[str] = None,
) -> str:
    """Write the table of a metrics folder (and the plot, and every run's metrics with the report's
    own record, where asked). RETURNS (str): the table."""
    found = load_records(Path(metrics_dir))
    text = markdown_table(found, title=title)
    Path(table).parent.mkdir(parents=True, exist_ok=True)
    Path(table).write_text(text, encoding="utf-8")
    if plot_path is not None:
        plot(found, Path(plot_path), title=title)
    if records is not None:
        Path(records).parent.mkdir(parents=True, exist_ok=True)
        written = {"provenance": provenance(command), "runs": [found[key] for key in sorted(found)]}
        Path(records).write_text(json.dumps(written, indent=2) + "\n", encoding="utf-8")
    return text
