"""Every number a document cites beside a record comes from that record (``tests/lab/records/test_citations.py``
holds README.md, docs/*.md and the shipped model's card to it).

A document is cut into blocks: a paragraph, one item of a list (its continuation lines included) or
one row of a table. A block *cites* the records it links or names: a path, in a Markdown link or in
backticks, to a file of a results tree (a folder named ``results`` or below one) that exists,
relative to the document or to the checkout; or ``COMMIT:PATH`` in backticks, the record as that
commit holds it (an earlier model's figures, overwritten since; held to its numbers, not to
today's record schema, since history is not amended). In a block that cites at least one
record, every measured number must appear in one of those records (a Markdown report is read with
the JSON beside it); a block that cites none is not checked (it says where its numbers come from in
another way, or has none). A block that ``python -m lab.records.numbers`` writes between its
markers is left to that command's ``--check``.

What counts as a number: a figure written with a decimal point, a thousands separator, a unit
suffix (``2.46x``, ``0.16%``, ``50M``) or an integer from 100 on that is not a year. Small plain
integers (``2 cores``, ``layer 1``, ``three seeds``), round hundreds (settings: ``1,000 sentences``,
``200 tokens``), versions (``0.7.0``), dates, identifiers
(``fp32``, ``WikiText-2``, ``CoNLL-2003``), code spans, fenced code and link targets are not.

A number *appears* in a record when a number of the record rounds to it at the number's own
precision, directly or in a unit the docs use: a fraction as a percentage (x100), seconds as minutes
or hours, a count in thousands or millions, bytes in MB. The record's numbers are the JSON's numeric
values, the figures in its strings, and for a Markdown or JSON-lines record every figure of its text.
A difference or ratio the record does not hold says how it follows from the record's fields, in a
comment right after it: ``1,410<!-- = tokens / seconds --> tokens/s`` (``derive``); the check
computes it from each cited JSON record. A number quoted from outside the repository names its
source the same way (``57.7<!-- source: Pilehvar and Camacho-Collados 2019 -->``); a bound written
``1e-5`` or after ``<=``, ``>=`` (a target) is a setting, not a measurement.
"""
import json
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path, PurePath, PurePosixPath
from typing import Any, Dict, Iterator, List, Optional, Sequence, Set, Tuple

from .check import is_dirty
from .derivation import derive

RECORD_SUFFIXES = (".json", ".jsonl", ".md")
# the units a document may give a recorded number in: the record's value times each of these
SCALES = (1.0, 100.0, 1 / 60, 1 / 3600, 1e-3, 1e-6, 1e-9, 1 / 2 ** 20)
_FENCE = re.compile(r"^(```|~~~)")
_TABLE_RULE = re.compile(r"^\|?\s*:?-{3,}")
_ITEM = re.compile(r"^(\s*)([-*+]|\d+\.)\s+")
_LINK = re.compile(r"\]\(([^)\s]+)\)")
_CODE = re.compile(r"`([^`]+)`")
# a block ``python -m lab.records.numbers`` writes from its records (and checks with ``--check``)
_GENERATED = re.compile(r"^<!-- /?numbers:[\w-]+(?::[\w./-]+)? -->$")
_COMMENT = re.compile(r"<!--.*?-->", re.S)
# a record as committed: ``COMMIT:PATH`` (7 to 40 hex digits)
_COMMITTED = re.compile(r"([0-9a-f]{7,40}):([\w./-]+)")
# a derivation written right after a number: ``1,410<!-- = tokens / seconds -->``
_DERIVED = re.compile(r"\s*<!--\s*=\s*(.+?)\s*-->")
# a number quoted from a source outside the repository (a paper), named right after it
_SOURCED = re.compile(r"\s*<!--\s*source:\s*\S.*?-->")
_URL = re.compile(r"https?://\S+")
# what is never a measured number: versions, dates, times of day, identifiers with digits
_NOT_NUMBERS = re.compile(
    r"\d+(?:\.\d+){2,}|\d{4}-\d\d-\d\d(?:[T ]\d\d:\d\d(?::\d\d)?)?|\d\d:\d\d(?::\d\d)?|(?<![\d.])[A-Za-z_]+[\w-]*\d[\w.-]*"
)
_NUMBER = re.compile(
    r"(?<![\w.,/#-])[+\-\u2212\u00b1]?(\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+\.\d+(?:e[-+]?\d+)?|\d+e[-+]?\d+|\d+)"
    r"(x\b|%|[kKMB]\b|\b)(?![.,]\d)"
)
_SUFFIX = {"k": 1e3, "K": 1e3, "M": 1e6, "B": 1e9}


@dataclass
class Number:
    """A figure a document writes.

    text (str): as written (``1,217``, ``2.46x``). value (float): its value in its own unit (``50M`` is
    50e6). step (float): half of its last written digit: a record's value within it matches.
    derivation (Optional[str]): how it follows from a record's fields, where the document says so.
    """

    text: str
    value: float
    step: float
    derivation: Optional[str] = None


@dataclass(frozen=True)
class Record:
    """A cited record: a file of a results tree in the checkout, or as committed at ``commit``.

    root (Path): the checkout. path (str): the file, relative to it. commit (Optional[str]): the
    commit a citation ``COMMIT:PATH`` names (read with ``git show``); None for the file as it is.
    """

    root: Path
    path: str
    commit: Optional[str] = None

    @property
    def name(self) -> str:
        return f"{self.commit}:{self.path}" if self.commit else self.path

    def text(self) -> Optional[str]:
        """RETURNS (Optional[str]): the file's text; None where it does not exist."""
        if self.commit is None:
            file = self.root / self.path
            return file.read_text(encoding="utf-8") if file.is_file() else None
        shown = subprocess.run(["git", "show", f"{self.commit}:{self.path}"], cwd=self.root, capture_output=True)
        return shown.stdout.decode("utf-8") if shown.returncode == 0 else None

    def sibling(self, name: str) -> "Record":
        return Record(self.root, str(PurePosixPath(self.path).with_name(name)), self.commit)


@dataclass
class Block:
    """A paragraph, list item or table row of a document.

    path (Path): the document. line (int): its first line (1-based). text (str): the block's text.
    records (List[Record]): the records it cites, in order, each once.
    """

    path: Path
    line: int
    text: str
    records: List[Record] = field(default_factory=list)


def blocks(path: Path, *, root: Path) -> Iterator[Block]:
    """The blocks of a Markdown document outside fenced code, each with the records it cites.

    path (Path): the document. root (Path): the checkout its paths may be relative to.
    RETURNS (Iterator[Block]): in document order.
    """
    lines, start, fenced, generated = [], 0, False, False
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines() + [""], start=1):
        if _FENCE.match(line.strip()):
            fenced = not fenced
            line = ""
        if _GENERATED.match(line.strip()):
            generated = not line.strip().startswith("<!-- /")
            line = ""
        if fenced or generated:
            line = ""
        is_row = line.lstrip().startswith("|")
        new_block = not line.strip() or is_row or (_ITEM.match(line) and not _ITEM.match(line).group(1))
        if new_block and lines:
            yield _block(path, start, lines, root)
            lines = []
        if line.strip() and not _TABLE_RULE.match(line.strip()):
            if not lines:
                start = number
            lines.append(line)
            if is_row:
                yield _block(path, start, lines, root)
                lines = []


def _block(path: Path, start: int, lines: Sequence[str], root: Path) -> Block:
    text = "\n".join(lines)
    found: List[Record] = []
    for target in cited_paths(text):
        record = _resolve(target, path.parent, root)
        if record is not None and record not in found:
            found.append(record)
    return Block(path, start, text, found)


def cited_paths(text: str) -> List[str]:
    """RETURNS (List[str]): the link targets and backticked words of ``text`` that look like paths
    (``COMMIT:PATH`` included)."""
    targets = [m.group(1).split("#")[0] for m in _LINK.finditer(text)]
    targets += [m.group(1).strip() for m in _CODE.finditer(text) if "/" in m.group(1) and " " not in m.group(1).strip()]
    return [t for t in targets if t and not t.startswith(("http://", "https://"))]


def _resolve(target: str, here: Path, root: Path) -> Optional[Record]:
    root = root.resolve()
    committed = _COMMITTED.fullmatch(target)
    if committed:
        record = Record(root, committed.group(2), committed.group(1))
        return record if is_record(PurePosixPath(record.path)) and record.text() is not None else None
    for base in (here, root):
        candidate = (base / target).resolve()
        if candidate.is_relative_to(root) and candidate.is_file() and is_record(candidate.relative_to(root)):
            return Record(root, candidate.relative_to(root).as_posix())
    return None


def is_record(relative: PurePath) -> bool:
    """RETURNS (bool): whether a checkout-relative path is a file of a results tree."""
    return relative.suffix in RECORD_SUFFIXES and "results" in relative.parts[:-1]


def numbers(text: str) -> List[Number]:
    """The measured numbers a block's prose writes (code, links, comments and identifiers left out).

    text (str): the block. RETURNS (List[Number]): in order; a number followed at once by
        ``<!-- = EXPR -->`` carries EXPR as its derivation.
    """
    prose = _blank(_COMMENT, text)
    prose = _LINK.sub(lambda m: "]" + " " * (len(m.group(0)) - 1), prose)
    prose = _blank(_NOT_NUMBERS, _blank(_URL, _blank(_CODE, prose)))
    found = []
    for match in _NUMBER.finditer(prose):
        digits, suffix = match.group(1), match.group(2)
        plain = digits.replace(",", "")
        derived = _DERIVED.match(text, match.end())
        bound = prose[:match.start()].rstrip().endswith(("<", ">", "<=", ">=", "\u2264", "\u2265"))
        if _SOURCED.match(text, match.end()) or re.fullmatch(r"1e-?\d+", plain) or bound:
            continue  # quoted from a named source outside the repository, or a bound (1e-5, <= 250)
        if not suffix and not derived and is_plain_integer(digits):
            continue
        value, step = magnitude(plain, suffix)
        found.append(Number(match.group(0).strip(), value, step, derived.group(1) if derived else None))
    return found


def is_plain_integer(digits: str) -> bool:
    """RETURNS (bool): whether a figure written without a unit is an integer that is no measured
    number by itself: under 100, a round hundred, or a year."""
    plain = digits.replace(",", "")
    if "." in plain or "e" in plain:
        return False
    year = "," not in digits and 1900 <= int(plain) <= 2100
    return int(plain) < 100 or int(plain) % 100 == 0 or year


def magnitude(plain: str, suffix: str) -> Tuple[float, float]:
    """RETURNS (Tuple[float, float]): a figure's value in its own unit (``50M`` is 50e6) and half of
    its last written digit (a value within it rounds to the figure)."""
    mantissa = plain.split("e")[0]
    decimals = len(mantissa.split(".")[1]) if "." in mantissa else 0
    exponent = int(plain.split("e")[1]) if "e" in plain else 0
    unit = _SUFFIX.get(suffix, 1.0)
    return float(plain) * unit, 0.5 * 10 ** (exponent - decimals) * unit


def _blank(pattern: "re.Pattern[str]", text: str) -> str:
    """``text`` with every match of ``pattern`` turned to spaces, so positions still match ``text``."""
    return pattern.sub(lambda m: " " * len(m.group(0)), text)


def record_values(record: Record) -> List[float]:
    """Every number a record holds: numeric JSON values and the figures in its strings (or, for a
    Markdown or JSON-lines record, in its text).

    record (Record): the record. RETURNS (List[float]): the values (magnitudes), sorted.
    """
    text = record.text() or ""
    values: Set[float] = set()
    if record.path.endswith(".json"):
        for leaf in _leaves(json.loads(text)):
            if isinstance(leaf, str):
                values.update(abs(n.value) for n in numbers(leaf))
            else:
                values.add(abs(float(leaf)))
    else:
        values.update(abs(n.value) for n in numbers(text))
        values.update(abs(float(m)) for m in re.findall(r"(?<![\w.])-?\d+(?:\.\d+)?(?:e[-+]?\d+)?", text))
    return sorted(values)


def _leaves(value: Any) -> Iterator[Any]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from _leaves(item)
    elif isinstance(value, list):
        for item in value:
            yield from _leaves(item)
    elif isinstance(value, (int, float, str)) and not isinstance(value, bool):
        yield value


def appears(number: Number, values: Sequence[float]) -> bool:
    """RETURNS (bool): whether a record's value, in one of ``SCALES``, rounds to ``number``."""
    target = abs(number.value)
    return any(abs(value * scale - target) <= number.step * (1 + 1e-9) for value in values for scale in SCALES)


def record_state(record: Record) -> List[str]:
    """What keeps a JSON record from standing behind a number: a run from a tree with uncommitted
    changes whose record does not say why (``dirty_note``); a model named without its version or its
    weights' SHA-256 and without a reason (``unknown.model``); no model and no ``model_note``.

    record (Record): the record (a Markdown report is judged by the JSON beside it, where there is one).
    RETURNS (List[str]): the problems; empty when it stands.
    """
    source = companion(record)
    if source is None:
        return []
    data = json.loads(source.text() or "null")
    name = source.name
    run = data.get("provenance") if isinstance(data, dict) else None
    if not isinstance(run, dict):
        return [f"{name}: no provenance record"]
    problems = []
    if is_dirty(run) and not run.get("dirty_note"):
        problems.append(f"{name}: run from a tree with uncommitted changes, and no dirty_note says why")
    models = run.get("model") if isinstance(run.get("model"), list) else [run.get("model")]
    explained = (run.get("unknown") or {}).get("model")
    if run.get("model") is None and not run.get("model_note") and not explained:
        problems.append(f"{name}: no model and no model_note")
    for model in (m for m in models if isinstance(m, dict)):
        for key, what in (("weights_sha256", "its weights' SHA-256"), ("version", "its version")):
            if not model.get(key) and not explained:
                problems.append(f"{name}: model {model.get('name')!r} without {what} or a reason")
    return problems


def companion(record: Record) -> Optional[Record]:
    """RETURNS (Optional[Record]): the JSON record behind a record file: itself, or for ``NAME.md``
    the ``NAME.json`` or ``NAME-metrics.json`` beside it; None where there is none."""
    if record.path.endswith(".json"):
        return record
    stem = PurePosixPath(record.path).stem
    for name in (f"{stem}.json", f"{stem}-metrics.json"):
        if record.sibling(name).text() is not None:
            return record.sibling(name)
    return None


def check_document(path: Path, *, root: Path) -> List[str]:
    """Every problem of a document's cited numbers and the records behind them.

    path (Path): the Markdown document. root (Path): the checkout.
    RETURNS (List[str]): ``FILE:LINE: ...`` lines; empty when every cited number is in its records
        and every cited record stands.
    """
    problems: List[str] = []
    cache: Dict[Record, List[float]] = {}
    where = path.relative_to(root) if path.is_relative_to(root) else path
    for block in blocks(path, root=root):
        if not block.records:
            continue
        values = []
        for record in block.records:
            if record not in cache:
                source = companion(record)
                extra = record_values(source) if source is not None and source != record else []
                cache[record] = record_values(record) + extra
            values += cache[record]
        for number in numbers(block.text):
            if number.derivation is not None:
                if not any(appears(number, [v]) for v in _derived(number.derivation, block.records)):
                    cited = ", ".join(r.name for r in block.records)
                    problems.append(f"{where}:{block.line}: {number.text} is not {number.derivation} in its records ({cited})")
            elif not appears(number, values):
                cited = ", ".join(r.name for r in block.records)
                problems.append(f"{where}:{block.line}: {number.text} is in none of its records ({cited})")
        # a record as an earlier commit holds it is held to its numbers only: history is not amended
        current = [record for record in block.records if record.commit is None]
        for problem in dict.fromkeys(p for record in current for p in record_state(record)):
            problems.append(f"{where}:{block.line}: {problem}")
    return problems


def _derived(expression: str, records: Sequence[Record]) -> List[float]:
    """RETURNS (List[float]): the derivation's value in each cited JSON record where it has one."""
    found = []
    for record in records:
        source = companion(record)
        if source is not None:
            result = derive(expression, json.loads(source.text() or "null"))
            if result is not None:
                found.append(abs(result))
    return found


def documents(root: Path) -> List[Path]:
    """RETURNS (List[Path]): the documents whose numbers are held to their records: README.md,
    docs/*.md and the shipped model's card."""
    found = [root / "README.md", *sorted((root / "docs").glob("*.md"))]
    found += sorted((root / "spacy_elmo" / "models").glob("*/MODEL_CARD.md"))
    return [p for p in found if p.is_file()]


def check_all(root: Path, only: Optional[Sequence[str]] = None) -> Tuple[int, List[str]]:
    """RETURNS (Tuple[int, List[str]]): how many documents were read, and their problems.

    only (Optional[Sequence[str]]): the documents to read (relative to ``root``); all of ``documents``
        where None."""
    found = documents(root) if only is None else [root / name for name in only]
    return len(found), [p for doc in found for p in check_document(doc, root=root)]
