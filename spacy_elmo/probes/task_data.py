"""The data of each probe task: default files, reading, the seeded training fraction and caps.

Defaults (files under the datasets directory: ``data_dir`` when given, else ``$SPACY_ELMO_DATA``,
else ``assets/datasets`` under the working directory, where ``python -m spacy project assets
--extra`` puts them in a checkout; each is an asset of project.yml, see docs/datasets.md):

======  ==========================================  ===================================  ==============
task    train                                       eval                                 train fraction
======  ==========================================  ===================================  ==============
upos    ud_english_ewt/en_ewt-ud-train.conllu       ud_english_ewt/en_ewt-ud-dev.conllu  0.1 (~1,250 sentences)
ner     conll2003/eng.train                         conll2003/eng.testa                  0.1 (~1,400 sentences)
wsd     senseval2_nltk/senseval.zip                 a seeded 20% of each word's uses     1.0 of 400 uses a word
wic     wic/train/train.data.txt                    wic/test/test.data.txt               0.4 (~2,170 pairs)
======  ==========================================  ===================================  ==============

A fraction is a seeded sample of the training items, nested (the 10% sample is inside the 50%
one), so runs at several fractions share their forward passes. Word-sense contexts are cut to
16 tokens either side of the target.
"""
import os
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from ..records.provenance import portable_path
from .conllu import PathLike, read_conllu
from .ner import read_ner_columns
from .wic import read_wic, wic_data_file
from .wsd import read_sense_uses, split_uses

TASKS = ("upos", "ner", "wsd", "wic")
DEFAULT_TASKS = ("upos", "wsd", "wic")
WSD_WINDOW = 16
WSD_MAX_PER_WORD = 400


@dataclass(frozen=True)
class TaskDefaults:
    train: str
    eval: Optional[str]
    train_fraction: float


DEFAULTS = {
    "upos": TaskDefaults("ud_english_ewt/en_ewt-ud-train.conllu", "ud_english_ewt/en_ewt-ud-dev.conllu", 0.1),
    "ner": TaskDefaults("conll2003/eng.train", "conll2003/eng.testa", 0.1),
    "wsd": TaskDefaults("senseval2_nltk/senseval.zip", None, 1.0),
    "wic": TaskDefaults("wic/train/train.data.txt", "wic/test/test.data.txt", 0.4),
}
DATA_ENV = "SPACY_ELMO_DATA"
# project.yml's vars.datasets, relative to the project directory
PROJECT_DATA = Path("assets") / "datasets"
FETCH = "python -m spacy project assets --extra"


def default_data_dir() -> Path:
    """The datasets directory when none is given: an installed package has no data of its own, so
    the data come from the environment or from the project a command runs in.

    RETURNS (Path): ``$SPACY_ELMO_DATA`` when set, else ``assets/datasets`` under the working
        directory (project.yml's ``vars.datasets``, where ``python -m spacy project assets --extra``
        puts the files).
    """
    return Path(os.environ[DATA_ENV]) if os.environ.get(DATA_ENV) else Path.cwd() / PROJECT_DATA


def parse_tasks(tasks: Union[str, Sequence[str]]) -> Tuple[str, ...]:
    """'all', one task, a comma-separated list or a sequence -> task names. Unknown names raise ValueError."""
    names = [t.strip() for t in (tasks.split(",") if isinstance(tasks, str) else tasks) if t.strip()]
    if names == ["all"]:
        return DEFAULT_TASKS
    unknown = [t for t in names if t not in TASKS]
    if unknown or not names:
        raise ValueError(f"unknown probe task {', '.join(unknown) or repr(tasks)}: choose from all, {', '.join(TASKS)}")
    return tuple(dict.fromkeys(names))


@dataclass
class TaskData:
    """task (str): the task. train, eval (list): its items. train_file, eval_file (Path): where they came
    from (eval_file None when eval is a split of train). details (Dict[str, Any]): sampling applied."""

    task: str
    train: List[Any]
    eval: List[Any]
    train_file: Path
    eval_file: Optional[Path]
    details: Dict[str, Any] = field(default_factory=dict)

    @property
    def eval_source(self) -> Path:
        """The file the eval items were read from (the training file when they are a split of it)."""
        return self.eval_file if self.eval_file is not None else self.train_file

    def sizes(self) -> Dict[str, int]:
        unit = {"upos": "sentences", "ner": "sentences", "wsd": "uses", "wic": "pairs"}[self.task]
        return {
            f"train_{unit}": len(self.train),
            "train_tokens": sum(_tokens(self.task, item) for item in self.train),
            f"eval_{unit}": len(self.eval),
            "eval_tokens": sum(_tokens(self.task, item) for item in self.eval),
        }

    def files(self) -> Dict[str, str]:
        """RETURNS (Dict[str, str]): the train and eval files as a record writes paths
        (``provenance.portable_path``: the default data are ``assets/datasets/...``)."""
        held_out = portable_path(self.eval_file) if self.eval_file is not None else "seeded split of train"
        return {"train": portable_path(self.train_file), "eval": held_out}


def _tokens(task: str, item: Any) -> int:
    if task == "wsd":
        return len(item.tokens)
    if task == "wic":
        return len(item.first) + len(item.second)
    return len(item[0])


def task_files(
    task: str, train: Optional[PathLike] = None, eval: Optional[PathLike] = None, data_dir: Optional[PathLike] = None
) -> Tuple[Path, Optional[Path]]:
    """The (train, eval) files of a task: those given, else the defaults under ``data_dir``
    (``default_data_dir()`` when None).

    Raises FileNotFoundError naming the missing file and, for a default one, its asset in
    project.yml and how to fetch it or point at it.
    """
    defaults = DEFAULTS[task]
    root = Path(data_dir) if data_dir is not None else default_data_dir()
    chosen = []
    for given, default, role in ((train, defaults.train, "train"), (eval, defaults.eval, "eval")):
        if given is None and default is None:
            chosen.append(None)
            continue
        path = Path(given) if given is not None else root / default
        if not path.exists():
            raise FileNotFoundError(f"{task} {role} data {path} not found" + ("" if given is not None else _how_to_get(task, role, default)))
        chosen.append(wic_data_file(path) if task == "wic" else path)
    return chosen[0], chosen[1]


def _how_to_get(task: str, role: str, default: str) -> str:
    return (
        f": the default {role} data of {task!r}, the project.yml asset ${{vars.datasets}}/{default}."
        f" Fetch it with `{FETCH}` in a spacy-elmo checkout (into {PROJECT_DATA}/), or set {DATA_ENV}"
        f" (or pass --data-dir DIR) to a folder that holds {default}, or pass --{role} FILE; see docs/datasets.md"
    )


def load_task_data(
    task: str,
    train_file: Path,
    eval_file: Optional[Path],
    *,
    train_fraction: Optional[float] = None,
    max_items: Optional[int] = None,
    seed: int = 0,
) -> TaskData:
    """Read a task's files and take the seeded training fraction (default per task) and caps.

    train_fraction (Optional[float]): share of the training items, in (0, 1]; None: the task's default.
    max_items (Optional[int]): at most this many train and eval items (sentences, uses, pairs).
    RETURNS (TaskData): the items in file order.
    """
    fraction = DEFAULTS[task].train_fraction if train_fraction is None else train_fraction
    if not 0.0 < fraction <= 1.0:
        raise ValueError(f"train fraction must be in (0, 1], not {fraction}")
    if max_items is not None and max_items < 1:
        raise ValueError(f"max sentences must be >= 1, not {max_items}")
    details: Dict[str, Any] = {"train_fraction": fraction, "max_items": max_items}
    if task == "wsd":
        train, held_out = _sense_data(train_file, eval_file, seed, details)
    else:
        reader = {"upos": read_conllu, "ner": read_ner_columns, "wic": read_wic}[task]
        train = reader(train_file)
        held_out = reader(eval_file)
    train = sample(train, fraction, seed=seed)
    if not train or not held_out:  # nothing to score is an error, never a score (a sample of some keeps one)
        raise ValueError(f"{task}: no {'training' if not train else 'evaluation'} items in {train_file if not train else eval_file}")
    if max_items is not None:
        train = sample(train, min(max_items / len(train), 1.0), seed=seed)
        held_out = sample(held_out, min(max_items / len(held_out), 1.0), seed=seed + 1)
    return TaskData(task, train, held_out, train_file, eval_file, details)


def _sense_data(train_file: Path, eval_file: Optional[Path], seed: int, details: Dict[str, Any]):
    uses = [u.window(WSD_WINDOW) for u in read_sense_uses(train_file)]
    details["context_window"] = WSD_WINDOW
    if eval_file is not None:
        return uses, [u.window(WSD_WINDOW) for u in read_sense_uses(eval_file)]
    details.update({"split": "seeded 20% of each word's uses held out", "max_uses_per_word": WSD_MAX_PER_WORD})
    return split_uses(uses, seed=seed, max_per_word=WSD_MAX_PER_WORD)


def sample(items: Sequence[Any], fraction: float, *, seed: int) -> List[Any]:
    """A seeded ``fraction`` of ``items`` (at least one), in their original order; nested across fractions."""
    if fraction >= 1.0:
        return list(items)
    order = list(range(len(items)))
    random.Random(seed).shuffle(order)
    keep = sorted(order[: max(int(round(fraction * len(items))), 1)])
    return [items[i] for i in keep]
