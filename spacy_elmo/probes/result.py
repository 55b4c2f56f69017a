"""What a probe run found: scores per task and representation, with what is needed to reproduce them."""
import json
from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, Optional

from .representations import BASELINES, MAJORITY, MEAN, MIX, WORD_IDENTITY

ROW_LABELS = {MEAN: "mean of layers", MIX: "scalar mix (learned)", MAJORITY: "majority class", WORD_IDENTITY: "word identity"}


def row_label(row: str) -> str:
    """RETURNS (str): the row's name in tables (``layer 0`` is the context-free char-CNN)."""
    if row == "layer 0":
        return "layer 0 (char-CNN, no context)"
    if row.startswith("layer "):
        return f"{row} (LSTM {row.split()[-1]})"
    return ROW_LABELS.get(row, row)


@dataclass
class TaskResult:
    """task (str): upos, ner, wsd or wic. metric (str): what the scores are (percent).
    scores (Dict[str, float]): per row (``layer 0`` .. ``layer L``, ``mean``, ``scalar mix``, baselines).
    sizes (Dict[str, int]): items and tokens of train and eval. data (Dict[str, str]): the files.
    details (Dict[str, Any]): learned mix weights, thresholds, defaults applied. seconds, cpu_seconds (float):
    wall and CPU time (all threads; on a busy machine, the measure of the work).
    """

    task: str
    metric: str
    scores: Dict[str, float]
    sizes: Dict[str, int] = field(default_factory=dict)
    data: Dict[str, str] = field(default_factory=dict)
    details: Dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    cpu_seconds: float = 0.0

    def best_layer(self) -> str:
        """RETURNS (str): the single layer that scores highest (the first on a tie)."""
        layers = {row: score for row, score in self.scores.items() if row.startswith("layer ")}
        return max(layers, key=layers.__getitem__)


@dataclass
class ProbeResult:
    """tasks (List[TaskResult]): in run order. model (Dict[str, Any]): where the biLM came from, its weights'
    SHA-256 and shape. settings (Dict[str, Any]): seed, fractions, caps. provenance (Dict[str, Any]):
    the results record (``spacy_elmo.records.provenance``: command, start commit, model, data files, CPU,
    threads, versions, date). embedding (Dict[str, Any]): tokens run through the biLM and how fast.
    seconds, cpu_seconds (float): the whole run's wall and CPU time."""

    tasks: List[TaskResult]
    model: Dict[str, Any] = field(default_factory=dict)
    settings: Dict[str, Any] = field(default_factory=dict)
    provenance: Dict[str, Any] = field(default_factory=dict)
    embedding: Dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    cpu_seconds: float = 0.0

    def __getitem__(self, task: str) -> TaskResult:
        for result in self.tasks:
            if result.task == task:
                return result
        raise KeyError(f"no {task!r} task in this result; it has {[t.task for t in self.tasks]}")

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    def rows(self) -> List[str]:
        """RETURNS (List[str]): every row any task scored, layers first and baselines last."""
        seen: List[str] = []
        for result in self.tasks:
            seen += [row for row in result.scores if row not in seen]
        return [r for r in seen if r not in BASELINES] + [r for r in BASELINES if r in seen]

    def table(self) -> str:
        """RETURNS (str): a Markdown table, rows = representations, columns = tasks (scores in percent)."""
        header = ["representation"] + [f"{t.task} ({t.metric})" for t in self.tasks]
        lines = ["| " + " | ".join(header) + " |", "|" + "---|" + "---:|" * len(self.tasks)]
        for row in self.rows():
            cells = [_cell(t.scores.get(row)) for t in self.tasks]
            lines.append("| " + " | ".join([row_label(row)] + cells) + " |")
        return "\n".join(lines)

    def markdown(self) -> str:
        """RETURNS (str): the table with a line per task saying what was trained and scored on what."""
        notes = []
        for t in self.tasks:
            sizes = ", ".join(f"{k.replace('_', ' ')} {v:,}" for k, v in t.sizes.items())
            files = ", ".join(f"{k} `{v}`" for k, v in t.data.items())
            notes.append(f"- **{t.task}**: {files}; {sizes}; {t.seconds:.0f} s ({t.cpu_seconds:.0f} s of CPU time).")
        model = self.model.get("source", "?")
        digest = str(self.model.get("weights_sha256", ""))[:12]
        return (
            f"# Layer probes: {model}\n\n{self.table()}\n\n"
            + "\n".join(notes)
            + f"\n\nModel weights sha256 {digest}...; seed {self.settings.get('seed')}; "
            f"{self.seconds:.0f} s in all ({self.cpu_seconds:.0f} s of CPU time, "
            f"{self.provenance.get('torch_threads', '?')} torch threads); command: `{self.provenance.get('command', '')}`.\n"
        )


def _cell(score: Optional[float]) -> str:
    return "–" if score is None else f"{score:.1f}"
