"""Every measured number of a bound document names the field of the record it reports, and equals
that field at the precision it is written (``tests/lab/records/test_binding.py`` holds the documents
of ``BOUND`` to it; the others, until converted, to ``lab.records.citations``).

A number binds itself with an HTML comment right after it (it does not render)::

    <!-- record ewt: results/campaign-third/after-part4/eval-finetune-ewt_model-best-eval_ewt-test.json -->
    perplexity 106.8<!-- ewt#/ppl -->, 8.1%<!-- ewt#/oov_rate *100 -->, 12.7<!-- run#/job_seconds /60 --> minutes,
    dev perplexity 62.4<!-- m#L412/dev_ppl -->, a gain of +8.29<!-- d = runs[3].score - runs[0].score -->

- ``NAME#POINTER``: the value at a JSON pointer (RFC 6901: ``/tasks/0/scores/layer 1``) of the record
  NAME; for a JSON-lines record ``NAME#LN/POINTER``, the pointer into its line N (from 1).
- ``NAME#POINTER *K`` or ``/K``: the field in the one unit the document writes it in (``*100`` a
  fraction as a percentage, ``/60`` seconds as minutes).
- ``NAME = EXPR``: a difference or ratio the record does not hold, computed from its fields
  (``lab.records.derivation``); ``NAME#LN = EXPR`` over one line of a JSON-lines record.
- ``setting`` (or ``setting: WHY``): not a measurement (a configuration value, a target, a size the
  data has by construction); ``source: WHO`` a number quoted from outside the repository.

NAME is a path relative to the checkout (``COMMIT:PATH`` for a record as a commit holds it), or a
name the document declares once on a line of its own: ``<!-- record NAME: PATH -->``. The number
passes when the field, times its scale, rounds to it: within half of its last written digit (a
unit suffix counts: ``50M`` is 50e6 within 0.5e6), sign included (``+8.29``; ``±`` compares the
magnitude). Numbers a ``<!-- numbers:NAME -->`` block holds are written from their records by
``python -m lab.records.numbers`` and compared with what it writes. What counts as a number (small
integers, round hundreds, versions, dates, code and links do not) is ``lab.records.citations``'s
rule, and a range's upper end (``4.87-7.68x``) counts too. Every record a number binds must stand
(``citations.record_state``: a clean start or a ``dirty_note``, a model with its version and
weights' SHA-256); a JSON-lines record stands by the JSON records beside it that hold a
``provenance``.
"""
import json
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path, PurePosixPath
from typing import Any, Dict, List, Optional, Tuple

from . import citations
from .check import is_dirty
from .derivation import derive
from .numbers import _BLOCK, render
from .reading import READ

# the documents held to this module; every other document of ``citations.documents`` is held to the
# older check of ``lab.records.citations`` until it is converted (``NOT_CONVERTED``)
BOUND = (
    "README.md",
    "spacy_elmo/models/en_small/MODEL_CARD.md",
    "docs/speed.md",
    "docs/neighbors.md",
    "docs/reliability.md",
    "docs/lm-head.md",
    "docs/formats.md",
    "docs/distributed.md",
    "docs/probes.md",
    "docs/textcat.md",
    "docs/semantic-change.md",
    "docs/datasets.md",
    "docs/export.md",
    "docs/api.md",
    "docs/pretraining.md",
    "docs/downstream.md",
    "docs/install.md",
)
# the documents still held only to ``lab.records.citations`` (a number passes where any value of a
# record its block cites matches it): each leaves this list when its numbers are bound
NOT_CONVERTED = (
    "docs/ARCHITECTURE.md", "docs/commands.md", "docs/download.md",
)
_DECLARE = re.compile(r"^<!--\s*record\s+([\w.-]+):\s*(\S+)\s*-->\s*$", re.M)
_MARK = re.compile(r"<!--\s*(.*?)\s*-->", re.S)
_FIELD = re.compile(r"^(?P<record>[^\s#=]+)#(?:L(?P<line>\d+))?(?P<pointer>/.*?|)(?:\s+(?P<op>[*/])\s*(?P<k>[\d.]+(?:e[-+]?\d+)?))?$", re.S)
_DERIVED = re.compile(r"^(?P<record>[^\s#=]+)(?:#L(?P<line>\d+))?\s*=\s*(?P<expr>.+)$", re.S)
# numbers that name something: a standard (ISO 639), a licence's or format's version (CC BY 4.0, v2.0)
_NAMED = re.compile(r"\b1B Word\b|\bISO \d+|\bCC BY(?:-[A-Z]+)* \d+\.\d+|\bv\d+(?:\.\d+)+")
# a number in prose, as ``citations._NUMBER`` reads it, but also after a hyphen (a range's upper end)
_NUMBER = re.compile(
    r"(?<![\w.,/#])[+\-\u2212\u00b1]?(\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+\.\d+(?:e[-+]?\d+)?|\d+e[-+]?\d+|\d+)"
    r"(x\b|%|[kKMB]\b|\b)(?![.,]\d)"
)


@dataclass
class Written:
    """A number a document writes, with the comment right after it.

    text (str): as written. value (float): signed, in its own unit. step (float): half its last
    digit. mark (Optional[str]): the comment's body; None where none follows. start (int): its offset
    in the block's text. magnitude (bool): written with ``±``: only its size is compared.
    """

    text: str
    value: float
    step: float
    mark: Optional[str]
    start: int
    magnitude: bool = False


def written_numbers(text: str) -> List[Written]:
    """The measured numbers a block's prose writes, each with the comment right after it.

    text (str): a block. RETURNS (List[Written]): in order (bounds after ``<=``/``>=`` and ``1e-N``
        left out, as in ``lab.records.citations.numbers``).
    """
    prose = citations._blank(citations._COMMENT, text)
    prose = citations._LINK.sub(lambda m: "]" + " " * (len(m.group(0)) - 1), prose)
    prose = citations._blank(citations._NOT_NUMBERS, citations._blank(citations._URL, citations._blank(citations._CODE, prose)))
    prose = citations._blank(_NAMED, prose)
    found = []
    for match in _NUMBER.finditer(prose):
        digits, suffix = match.group(1), match.group(2)
        plain = digits.replace(",", "")
        mark = _MARK.match(text, match.end())
        before = prose[:match.start()].rstrip()
        if re.fullmatch(r"1e-?\d+", plain) or before.endswith(("<", ">", "<=", ">=", "\u2264", "\u2265")):
            continue
        if not suffix and not mark and citations.is_plain_integer(digits):
            continue
        value, step = citations.magnitude(plain, suffix)
        sign = match.group(0)[0]
        if sign == "-" and text[:match.start()].endswith("-->"):
            sign = ""  # a range after a bound number: 0.92<!-- ... -->-1.11
        written = match.group(0).strip()
        found.append(Written(written.lstrip("-") if not sign else written, value * (-1 if sign in ("-", "\u2212") else 1),
                             step, mark.group(1) if mark else None, match.start(), sign == "\u00b1"))
    return found


@dataclass(frozen=True)
class Binding:
    """What a number's comment names: a record (by path, relative to the checkout, or ``COMMIT:PATH``),
    a line of a JSON-lines record, and a pointer and scale or an expression."""

    record: str
    line: Optional[int]
    pointer: Optional[str]
    scale: float
    expression: Optional[str]


def parse_mark(mark: str, names: Dict[str, str]) -> Optional[Binding]:
    """RETURNS (Optional[Binding]): what a comment after a number binds it to, names resolved; None
    where the comment is no binding."""
    field = _FIELD.match(mark)
    if field:
        k = float(field.group("k")) if field.group("k") else 1.0
        scale = k if field.group("op") != "/" else 1 / k
        line = int(field.group("line")) if field.group("line") else None
        return Binding(names.get(field.group("record"), field.group("record")), line, field.group("pointer"), scale, None)
    derived = _DERIVED.match(mark)
    if derived and (derived.group("record") in names or "/" in derived.group("record")):
        line = int(derived.group("line")) if derived.group("line") else None
        return Binding(names.get(derived.group("record"), derived.group("record")), line, None, 1.0, derived.group("expr"))
    return None


def pointer_value(data: Any, pointer: str) -> Any:
    """RETURNS (Any): the value at a JSON pointer (RFC 6901). Raises KeyError naming the step that
    is missing."""
    for step in pointer.split("/")[1:] if pointer else []:
        step = step.replace("~1", "/").replace("~0", "~")
        if isinstance(data, list):
            if not step.isdigit() or int(step) >= len(data):
                raise KeyError(step)
            data = data[int(step)]
        elif isinstance(data, dict) and step in data:
            data = data[step]
        else:
            raise KeyError(step)
    return data


@lru_cache(maxsize=None)
def _text(root: Path, name: str) -> Optional[str]:
    committed = citations._COMMITTED.fullmatch(name)
    record = citations.Record(root, committed.group(2), committed.group(1)) if committed else citations.Record(root, name)
    return record.text()


@lru_cache(maxsize=None)
def _parsed(root: Path, name: str, line: Optional[int]) -> Any:
    text = _text(root, name)
    if text is None:
        raise LookupError(f"{name}: no such record")
    if name.endswith(".jsonl"):
        if line is None:
            raise LookupError(f"{name}: a JSON-lines record needs a line (NAME#LN/POINTER)")
        lines = text.splitlines()
        if not 1 <= line <= len(lines):
            raise LookupError(f"{name}: no line {line}")
        return json.loads(lines[line - 1])
    if not name.endswith(".json"):
        raise LookupError(f"{name}: not a JSON or JSON-lines record")
    return json.loads(text)


def _data(root: Path, binding: Binding) -> Any:
    return _parsed(root, binding.record, binding.line)


def bound_value(root: Path, binding: Binding) -> float:
    """RETURNS (float): the value a binding names, times its scale. Raises LookupError saying what
    is missing."""
    data = _data(root, binding)
    if binding.expression is not None:
        value = derive(binding.expression, data)
        if value is None:
            raise LookupError(f"{binding.record}: {binding.expression} is not computable from its fields")
        return value
    try:
        value = pointer_value(data, binding.pointer or "")
    except KeyError as error:
        raise LookupError(f"{binding.record}: no field {binding.pointer} (at {error.args[0]!r})") from None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise LookupError(f"{binding.record}#{binding.pointer}: not a number ({value!r:.40})")
    return float(value) * binding.scale


def matches(number: Written, value: float) -> bool:
    """RETURNS (bool): whether ``value`` rounds to the number as written (its size alone for ``±``)."""
    target, value = (abs(number.value), abs(value)) if number.magnitude else (number.value, value)
    return abs(value - target) <= number.step * (1 + 1e-9)


def declared(text: str) -> Dict[str, str]:
    """RETURNS (Dict[str, str]): the record names a document declares (``<!-- record NAME: PATH -->``)."""
    return {m.group(1): m.group(2) for m in _DECLARE.finditer(text)}


def check_text(text: str, where: str, *, root: Path) -> Tuple[List[str], int]:
    """Every problem of a bound document's numbers.

    text (str): the document. where (str): its path, relative to the checkout (for messages and its
        blocks). root (Path): the checkout.
    RETURNS (Tuple[List[str], int]): ``FILE:LINE: ...`` problems, and how many numbers are bound to
        a field (generated ones included).
    """
    root = root.resolve()
    names = declared(text)
    problems, used, bound = [], set(), 0
    for name, path in names.items():
        if _text(root, path) is None:
            problems.append(f"{where}: record {name}: {path} does not exist")
    if _BLOCK.search(text):
        READ.clear()
        if render(text, root) != text:
            problems.append(f"{where}: a generated block differs from its records; run python -m lab.records.numbers --document {where}")
        bound += sum(len(written_numbers(m.group("body"))) for m in _BLOCK.finditer(text))
        used.update(READ)
    for line, block in _blocks(text):
        for number in written_numbers(block):
            at = f"{where}:{line + block[:number.start].count(chr(10))}"
            if number.mark is None:
                problems.append(f"{at}: {number.text} names no record field (NUMBER<!-- NAME#POINTER -->, or <!-- setting -->)")
                continue
            if number.mark == "setting" or number.mark.startswith(("setting:", "source:")):
                continue
            binding = parse_mark(number.mark, names)
            if binding is None:
                problems.append(f"{at}: {number.text}<!-- {number.mark} --> is not a binding (NAME#POINTER, NAME = EXPR, setting)")
                continue
            try:
                value = bound_value(root, binding)
            except LookupError as error:
                problems.append(f"{at}: {number.text}: {error}")
                continue
            used.add(binding.record)
            bound += 1
            if not matches(number, value):
                problems.append(f"{at}: {number.text} is not {number.mark} ({value:.6g})")
    for record in sorted(used):
        problems += [f"{where}: {problem}" for problem in record_problems(root, record)]
    return problems, bound


def _blocks(text: str) -> List[Tuple[int, str]]:
    """RETURNS (List[Tuple[int, str]]): the document's text outside fenced code and generated blocks,
    as (first line, text) runs of lines, so a number's line is found."""
    runs, lines, start, fenced, generated = [], [], 1, False, False
    for number, line in enumerate(text.splitlines(), start=1):
        if citations._FENCE.match(line.strip()):
            fenced = not fenced
            line = ""
        elif citations._GENERATED.match(line.strip()):
            generated = not line.strip().startswith("<!-- /")
            line = ""
        if fenced or generated or _DECLARE.match(line):
            line = ""
        if not line.strip():
            if lines:
                runs.append((start, "\n".join(lines)))
            lines = []
            continue
        if not lines:
            start = number
        lines.append(line)
    if lines:
        runs.append((start, "\n".join(lines)))
    return runs


def record_problems(root: Path, name: str) -> List[str]:
    """What keeps a bound record from standing behind its numbers (none for ``COMMIT:PATH``: history
    is not amended); a JSON-lines record by the JSON records beside it that hold a provenance."""
    if citations._COMMITTED.fullmatch(name):
        return []
    if not name.endswith(".jsonl"):
        return citations.record_state(citations.Record(root, name)) + _unspecific(root, name)
    folder = PurePosixPath(name).parent
    beside = [p for p in sorted((root / folder).glob("*.json")) if "provenance" in json.loads(p.read_text(encoding="utf-8"))]
    if not beside:
        return [f"{name}: no JSON record with a provenance beside it"]
    return [p for path in beside for name in [path.relative_to(root).as_posix()]
            for p in citations.record_state(citations.Record(root, name)) + _unspecific(root, name)]


# what a dirty_note says when it does not know what differed: such a record backs no bound number
UNSPECIFIC = "not which"


def _unspecific(root: Path, name: str) -> List[str]:
    """RETURNS (List[str]): a problem where a record started from a tree with uncommitted changes and
    its ``dirty_note`` does not say what they were."""
    run = json.loads((root / name).read_text(encoding="utf-8")).get("provenance") or {}
    if is_dirty(run) and UNSPECIFIC in str(run.get("dirty_note")):
        return [f"{name}: run from a tree with uncommitted changes, and its dirty_note does not say what differed"]
    return []


def check_all(root: Path) -> Tuple[Dict[str, int], List[str]]:
    """RETURNS (Tuple[Dict[str, int], List[str]]): the numbers bound in each document of ``BOUND``,
    and their problems."""
    counts, problems = {}, []
    for where in BOUND:
        found, counts[where] = check_text((root / where).read_text(encoding="utf-8"), where, root=root)
        problems += found
    return counts, problems


def decimal_spans(text: str) -> List[Tuple[int, int]]:
    """RETURNS (List[Tuple[int, int]]): where a document's prose (generated blocks included; code,
    comments, links, versions and identifiers not) writes a number with a decimal point: the numbers
    a mutation test changes."""
    prose = "\n".join(" " * len(line) if _DECLARE.match(line) else line for line in text.split("\n"))
    prose = citations._blank(re.compile(r"^(```|~~~).*?^(```|~~~)[^\n]*$", re.S | re.M), prose)
    prose = citations._blank(citations._COMMENT, prose)
    prose = citations._LINK.sub(lambda m: "]" + " " * (len(m.group(0)) - 1), prose)
    prose = citations._blank(citations._NOT_NUMBERS, citations._blank(citations._URL, citations._blank(citations._CODE, prose)))
    prose = citations._blank(_NAMED, prose)
    return [m.span() for m in re.finditer(r"(?<![\w.])\d{1,3}(?:,\d{3})*\.\d+|(?<![\w.,])\d+\.\d+", prose)]
