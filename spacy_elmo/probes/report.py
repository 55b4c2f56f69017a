"""Writing a probe run: probe.json (everything), probe.md (the table), probe.png (a bar chart per task)."""
from pathlib import Path
from typing import List, Optional

from ..files import write_atomic
from ..records.plots import pyplot
from .representations import BASELINES
from .result import ProbeResult, row_label


def write_report(result: ProbeResult, output: Path) -> List[Path]:
    """Write OUT/probe.json, OUT/probe.md and OUT/probe.png (skipped with one line on stderr
    without matplotlib, the ``plot`` extra).

    RETURNS (List[Path]): the files written.
    """
    output = Path(output)
    output.mkdir(parents=True, exist_ok=True)
    written = [output / "probe.json", output / "probe.md"]
    write_atomic(written[0], (result.to_json() + "\n").encode("utf-8"))
    write_atomic(written[1], result.markdown().encode("utf-8"))
    plotted = plot_probe(result, output / "probe.png")
    return written + ([plotted] if plotted is not None else [])


def plot_probe(result: ProbeResult, path: Path) -> Optional[Path]:
    """A bar chart per task: the layers, mean and mix in colour, the baselines in grey.
    RETURNS (Optional[Path]): None without matplotlib."""
    plt = pyplot(str(path))
    if plt is None:
        return None
    tasks = result.tasks
    fig, axes = plt.subplots(1, len(tasks), figsize=(3.6 * len(tasks) + 0.6, 4.2), dpi=100, squeeze=False)
    for ax, task in zip(axes[0], tasks):
        rows = [r for r in result.rows() if r in task.scores]
        values = [task.scores[r] for r in rows]
        colours = ["#9e9e9e" if r in BASELINES else "#4c72b0" if r.startswith("layer ") else "#dd8452" for r in rows]
        bars = ax.bar(range(len(rows)), values, color=colours)
        ax.bar_label(bars, labels=[f"{v:.1f}" for v in values], fontsize=7, padding=1)
        ax.set_xticks(range(len(rows)))
        ax.set_xticklabels([row_label(r).split(" (")[0] for r in rows], rotation=60, ha="right", fontsize=8)
        ax.set_title(f"{task.task} ({task.metric})", fontsize=10)
        low = min(values)
        ax.set_ylim(max(0.0, low - 0.15 * (max(values) - low + 1.0) - 5.0), min(100.0, max(values) + 5.0))
        ax.grid(True, axis="y", alpha=0.3)
    fig.suptitle(f"Layer probes: {result.model.get('source', '')}", fontsize=11)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path
