"""What a run tells its user: a progress line, a JSONL metrics log and a PNG learning curve."""
import json
import math
import sys
import time
from pathlib import Path
from typing import IO, Any, Dict, List, Optional

from ..files import write_atomic
from ..records.plots import pyplot


def format_duration(seconds: float) -> str:
    if not math.isfinite(seconds) or seconds < 0:
        return "?"
    seconds = int(seconds)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes:02d}:{secs:02d}"


class ProgressLine:
    """Step, tokens/s, loss, perplexity and ETA; rewritten in place on a terminal, one line per report otherwise.

    total_steps (Optional[int]): for the percentage and ETA; None when unknown.
    max_time (float): a time limit in seconds (0: none); the ETA is the nearer of the two ends.
    stream (IO): where to write (stderr by default).
    """

    def __init__(self, total_steps: Optional[int], *, max_time: float = 0.0, stream: Optional[IO[str]] = None) -> None:
        self.total_steps = total_steps
        self.max_time = max_time
        self.stream = stream if stream is not None else sys.stderr
        self.start = time.monotonic()
        self._tty = hasattr(self.stream, "isatty") and self.stream.isatty()

    def line(self, *, step: int, start_step: int, tokens_per_s: float, loss: float, elapsed: float) -> str:
        ppl = math.exp(min(loss, 50.0))
        eta = float("inf")
        if self.total_steps and step > start_step:
            per_step = elapsed / (step - start_step)
            eta = per_step * max(self.total_steps - step, 0)
        if self.max_time > 0:
            eta = min(eta, max(self.max_time - elapsed, 0.0))
        total = f"/{self.total_steps}" if self.total_steps else ""
        percent = f" {100.0 * step / self.total_steps:5.1f}%" if self.total_steps else ""
        return (
            f"step {step}{total}{percent} | {tokens_per_s:,.0f} tok/s | loss {loss:.3f} | ppl {ppl:,.1f}"
            f" | elapsed {format_duration(elapsed)} | ETA {format_duration(eta)}"
        )

    def report(self, **values: Any) -> None:
        text = self.line(**values)
        if self._tty:
            self.stream.write("\r\x1b[K" + text)
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def message(self, text: str) -> None:
        if self._tty:
            self.stream.write("\r\x1b[K")
        self.stream.write(text + "\n")
        self.stream.flush()


class MetricsLog:
    """Appends one JSON object per line (a resumed run keeps appending to the same file)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)

    def write(self, record: Dict[str, Any]) -> None:
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(record) + "\n")

    def read(self) -> List[Dict[str, Any]]:
        if not self.path.is_file():
            return []
        return [json.loads(line) for line in self.path.read_text(encoding="utf-8").splitlines() if line.strip()]

    def drop_after(self, step: int) -> int:
        """Remove the records of steps after ``step`` (a resumed run's checkpoint: it trains them
        again and logs them anew), rewriting the file atomically. RETURNS (int): records removed."""
        if not self.path.is_file():
            return 0
        lines = self.path.read_text(encoding="utf-8").splitlines()
        kept = [line for line in lines if line.strip() and not _after(line, step)]
        removed = sum(1 for line in lines if line.strip()) - len(kept)
        if removed:
            write_atomic(self.path, "".join(line + "\n" for line in kept).encode("utf-8"))
        return removed


def _after(line: str, step: int) -> bool:
    try:
        record = json.loads(line)
    except json.JSONDecodeError:  # a line cut short by a kill: the step it logged is trained again
        return True
    return isinstance(record, dict) and isinstance(record.get("step"), int) and record["step"] > step


def plot_learning_curve(records: List[Dict[str, Any]], path: Path, *, title: str = "biLM training") -> Optional[Path]:
    """Training and held-out perplexity against step, as a PNG, with a layer probe's scores below
    when the evaluations carry them (the ``[probe]`` config section).

    RETURNS None if there is nothing to plot, or if matplotlib (the ``plot`` extra) is not
    installed: then one line on stderr says so, and the run goes on.
    """
    train = [(r["step"], r["train_ppl"]) for r in records if r.get("kind") == "train"]
    dev = [(r["step"], r["dev_ppl"]) for r in records if r.get("kind") == "eval"]
    probed = [r for r in records if r.get("kind") == "eval" and r.get("probe")]
    if not train and not dev:
        return None
    plt = pyplot(str(path))
    if plt is None:
        return None

    if probed:
        fig, (ax, below) = plt.subplots(2, 1, figsize=(7, 8), dpi=100, sharex=True)
        _plot_probe(below, probed)
    else:
        fig, ax = plt.subplots(figsize=(7, 4.5), dpi=100)
    if train:
        ax.plot(*zip(*train), label="train (sampled/full loss)", linewidth=1)
    if dev:
        ax.plot(*zip(*dev), "o-", label="held-out (full softmax)", linewidth=1.5)
    ax.set_yscale("log")
    ax.set_xlabel("step")
    ax.set_ylabel("perplexity (geometric mean of both directions)")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def _plot_probe(ax, records: List[Dict[str, Any]]) -> None:
    """Each probe row (layers, mean, mix; baselines dashed) against step."""
    probe = records[-1]["probe"]
    for row in probe["scores"]:
        points = [(r["step"], r["probe"]["scores"][row]) for r in records if row in r["probe"]["scores"]]
        ax.plot(*zip(*points), "--" if row in ("majority", "word identity") else "o-", label=row, linewidth=1)
    ax.set_xlabel("step")
    ax.set_ylabel(f"{probe['task']} probe {probe['metric']} (%)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
