"""A case of the hostile-file corpus, how one is made from a fixture, and the damages every file of
every layout gets (``file_damages``) whatever its format.

A case is one damaged copy of one layout in its own folder under the corpus root, named
``LAYOUT/DAMAGE``; it is loaded the way a user gives that layout (``model=PATH``, or a pair as
``options=`` + ``weights=``). Everything is seeded by the case's name, so a corpus built twice with
the same seed is the same bytes.
"""
import random
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, List, Optional, Sequence

from . import damage

Damage = Callable[[Path, random.Random], None]
# files of a layout that a biLM does not need: damage to them may leave a model that loads cleanly
BINARY_SUFFIXES = (".hdf5", ".safetensors", ".pkl", ".zip", ".gz", ".index", ".pb")


@dataclass(frozen=True)
class Case:
    """One damaged model.

    name (str): "LAYOUT/DAMAGE", unique in the corpus.
    layout (str): the published layout it was made from.
    model (str): what the user gives, relative to the corpus root: ``model=`` (a file or folder), or
        for a pair given as two files, ``options=``.
    weights (Optional[str]): for a pair given as two files, ``weights=``.
    may_load (bool): the damage may leave a model that loads (a flipped byte inside a float, a file
        the biLM does not need): loading cleanly is then an acceptable outcome.
    kind (str): the family of damage (truncate, flip, bomb, link, huge, ...), for the record.
    """

    name: str
    layout: str
    model: str
    weights: Optional[str] = None
    may_load: bool = False
    kind: str = ""

    def paths(self, root: Path) -> List[str]:
        """RETURNS (List[str]): the paths the user gave, as absolute strings: an error names one."""
        return [str(root / p) for p in (self.model, self.weights) if p]

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass
class Layout:
    """A published layout as a fixture: ``source`` (a file or folder), copied under its own name;
    ``files``: the files inside a folder layout to damage one by one (empty for a single-file
    layout); ``optional``: those the biLM does not need; ``pair``: (options, weights) inside the
    folder when the user gives the two files rather than the folder."""

    name: str
    source: Path
    files: Sequence[str] = ()
    optional: Sequence[str] = ()
    pair: Optional[Sequence[str]] = None


class Corpus:
    """Builds cases under ``root``: each ``add`` copies the layout's fixture into ``root/LAYOUT/DAMAGE``
    and damages it there."""

    def __init__(self, root: Path, seed: int = 0, only: Optional[Sequence[str]] = None) -> None:
        self.root = Path(root)
        self.seed = seed
        self.only = None if only is None else set(only)
        self.cases: List[Case] = []

    def rng(self, name: str) -> random.Random:
        return random.Random(f"{self.seed}:{name}")

    def add(self, layout: Layout, damage_name: str, apply: Damage, *, target: Optional[str] = None,
            may_load: bool = False, kind: str = "") -> Optional[Case]:
        """Copy ``layout``'s fixture, run ``apply(path, rng)`` on ``target`` inside it (None: the
        copied file or folder itself) and record the case (None: a case not in ``only``)."""
        name = f"{layout.name}/{damage_name}"
        if self.only is not None and name not in self.only:
            return None
        assert name not in {c.name for c in self.cases}, name
        folder = self.root / layout.name / damage_name
        copied = damage.copy_fixture(layout.source, folder / layout.source.name)
        apply(copied / target if target else copied, self.rng(name))
        relative = copied.relative_to(self.root)
        if layout.pair:
            model, weights = (str(relative / p) for p in layout.pair)
        else:
            model, weights = str(relative), None
        case = Case(name, layout.name, model, weights, may_load, kind or damage_name.split("-")[0])
        self.cases.append(case)
        return case

    def intact(self, layout: Layout) -> Case:
        """The layout undamaged: it must load (the corpus's control)."""
        return self.add(layout, "intact", lambda path, rng: None, may_load=True, kind="intact")


def file_damages(corpus: Corpus, layout: Layout) -> None:
    """Every file of ``layout`` (or the single file it is) truncated at several points, flipped, made
    empty, removed, replaced by a folder and, for the large binary ones, made huge and sparse; text
    files also get undecodable bytes."""
    targets: Sequence[Optional[str]] = layout.files or [None]
    for target in targets:
        label = _label(target or layout.source.name)
        optional = target in layout.optional
        binary = (target or layout.source.name).endswith(BINARY_SUFFIXES) or "data-0" in (target or "")
        for fraction, cut in ((0.0, "empty"), (0.02, "cut-2pct"), (0.5, "cut-half"), (1.0, "cut-last-byte")):
            # the last byte may be a text file's newline, a shard's padding or a gzip trailer's
            corpus.add(layout, f"{cut}-{label}", lambda p, r, f=fraction: damage.truncate(p, f), target=target,
                       may_load=optional or fraction == 1.0, kind="truncate")
        corpus.add(layout, f"flip-{label}", lambda p, r: damage.flip_bytes(p, r), target=target, may_load=True,
                   kind="flip")
        corpus.add(layout, f"flip-many-{label}", lambda p, r: damage.flip_bytes(p, r, 64), target=target,
                   may_load=True, kind="flip")
        corpus.add(layout, f"dir-for-{label}", lambda p, r: damage.replace_with_directory(p), target=target,
                   may_load=optional, kind="directory")
        if target is not None:
            corpus.add(layout, f"missing-{label}", lambda p, r: p.unlink(), target=target, may_load=optional,
                       kind="missing")
        if binary:
            # a valid file followed by a hole: a reader that reads only what the file declares may load it
            corpus.add(layout, f"sparse-8gib-{label}", lambda p, r: damage.sparse_huge(p), target=target,
                       may_load=True, kind="huge")
        else:
            corpus.add(layout, f"bad-utf8-{label}", lambda p, r: damage.invalid_utf8(p, r), target=target,
                       may_load=optional, kind="utf8")


def _label(name: str) -> str:
    return name.replace("/", "_")


def select(cases: Sequence[Case], names: Sequence[str]) -> List[Case]:
    """The cases named, in the given order (an unknown name is an error)."""
    by_name = {c.name: c for c in cases}
    missing = [n for n in names if n not in by_name]
    assert not missing, missing
    return [by_name[n] for n in names]


