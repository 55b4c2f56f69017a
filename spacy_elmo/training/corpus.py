"""Streaming corpus readers: plain text, JSONL and .spacy DocBin, from files, directories and globs.

Nothing here holds more than one line (bounded by ``max_line_chars``) or one
DocBin file in memory, so memory does not grow with the corpus. Files are opened and lines decoded
as every command reads text (``io.text_input``: plain, .gz, .bz2, .xz, .zst, .lz4; binary files refused; bytes
that are not UTF-8 replaced with U+FFFD and the lines counted, or refused with ``strict_utf8``).
Lines that are empty, too long or malformed JSON are skipped and counted in a ``CorpusStats``,
never fatal.
"""
import io
import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, Union

from ..io.text_input import CODECS, decode_line, open_text, text_files

PathLike = Union[str, Path]
Tokenizer = Callable[[str], List[str]]
FORMATS = ("auto", "txt", "jsonl", "spacy")
_END = object()
_SUFFIX_FORMATS = {".txt": "txt", ".text": "txt", ".tokens": "txt", ".jsonl": "jsonl", ".spacy": "spacy"}


@dataclass
class CorpusStats:
    """Counts of what a pass over a corpus read and skipped.

    lines (int): lines (or DocBin docs) seen.
    segments (int): lines/docs kept (each becomes one or more sentences).
    tokens (int): tokens of the kept segments.
    skipped (Counter): skipped lines by reason: "empty", "too_long", "bad_json", "no_text".
    undecodable (int): lines kept with bytes that are not UTF-8 replaced by U+FFFD.
    first_undecodable (Optional[str]): the first such line, ``FILE:LINE``.
    """

    lines: int = 0
    segments: int = 0
    tokens: int = 0
    skipped: Counter = field(default_factory=Counter)
    undecodable: int = 0
    first_undecodable: Optional[str] = None

    def skip(self, reason: str) -> None:
        self.skipped[reason] += 1

    @property
    def n_skipped(self) -> int:
        return sum(self.skipped.values())

    def to_dict(self) -> Dict[str, object]:
        return {"lines": self.lines, "segments": self.segments, "tokens": self.tokens, "skipped": dict(self.skipped),
                "undecodable": self.undecodable}

    def summary(self) -> str:
        reasons = ", ".join(f"{n} {reason}" for reason, n in sorted(self.skipped.items()))
        skipped = f"; skipped {self.n_skipped} lines ({reasons})" if self.skipped else ""
        replaced = (f"; {self.undecodable} lines with bytes that are not UTF-8, replaced by U+FFFD (the first: "
                    f"{self.first_undecodable}; --strict-utf8 refuses them)") if self.undecodable else ""
        return f"{self.segments} segments, {self.tokens} tokens from {self.lines} lines{skipped}{replaced}"


def resolve_paths(spec: Union[PathLike, Sequence[PathLike]]) -> List[Path]:
    """Files named by a path, a directory (recursively), a glob, or a comma-separated / list of these
    (``io.text_input.text_files``: every file of a folder, read by its suffix's format or as text).

    RETURNS (List[Path]): the files, de-duplicated. Raises FileNotFoundError naming what matched nothing.
    """
    return [path for path, _ in text_files(spec, suffixes=None)]


def file_format(path: Path, fmt: str = "auto") -> str:
    """The reader for a file: ``fmt`` unless "auto", else from the suffix (before any .gz); txt by default."""
    if fmt not in FORMATS:
        raise ValueError(f"corpus format must be one of {FORMATS}, not {fmt!r}")
    if fmt != "auto":
        return fmt
    suffixes = [s for s in path.suffixes if s not in CODECS]
    return _SUFFIX_FORMATS.get(suffixes[-1] if suffixes else "", "txt")


def bounded_lines(handle: io.BufferedIOBase, max_bytes: int) -> Iterator[Optional[bytes]]:
    """Lines of a binary file; a line longer than ``max_bytes`` yields None and is never held whole."""
    while True:
        line = handle.readline(max_bytes + 1)
        if not line:
            return
        if len(line) > max_bytes and not line.endswith(b"\n"):
            # drain the rest of the over-long line in bounded chunks
            while True:
                rest = handle.readline(max_bytes + 1)
                if not rest or rest.endswith(b"\n"):
                    break
            yield None
            continue
        yield line


@dataclass(frozen=True)
class ReadRange:
    """The part of one file a rank reads: the lines whose first byte is in [start, end).

    path (Path): the file. start (int): a byte offset. end (Optional[int]): None: to the end.
    """

    path: Path
    start: int = 0
    end: Optional[int] = None


def splittable(path: Path, fmt: str) -> bool:
    """Whether a file can be read from a byte offset: uncompressed text or JSONL, not a DocBin."""
    return file_format(path, fmt) in ("txt", "jsonl") and path.suffix not in CODECS


def plan_reads(files: Sequence[Path], fmt: str, shard: int, n_shards: int) -> Optional[List[ReadRange]]:
    """What rank ``shard`` of ``n_shards`` reads of ``files`` (in this order), so that the ranks read
    disjoint parts and each about 1/n of the bytes.

    Uncompressed text and JSONL: the files' bytes taken end to end and cut into ``n_shards``
    contiguous ranges (a line belongs to the range holding its first byte). With a file that cannot
    be read from an offset (``.gz``, DocBin) and at least as many files as ranks: whole files, each
    to the rank that has the fewest bytes so far.
    RETURNS (Optional[List[ReadRange]]): this rank's ranges; None where neither applies (fewer
        compressed files than ranks): then every rank reads every line and keeps every n-th.
    """
    sizes = [path.stat().st_size for path in files]
    if all(splittable(path, fmt) for path in files):
        total = sum(sizes)
        low, high = total * shard // n_shards, total * (shard + 1) // n_shards
        ranges, offset = [], 0
        for path, size in zip(files, sizes):
            start, end = max(low - offset, 0), min(high - offset, size)
            if start < end:
                ranges.append(ReadRange(path, start, None if end >= size else end))
            offset += size
        return ranges
    if len(files) < n_shards:
        return None
    loads, mine = [0] * n_shards, []
    for path, size in zip(files, sizes):
        rank = min(range(n_shards), key=lambda k: (loads[k], k))
        loads[rank] += size
        if rank == shard:
            mine.append(ReadRange(path))
    return mine


def _skip_partial_line(handle: io.BufferedIOBase, start: int) -> None:
    """Move to ``start``, then past the line under way there (the previous range's), if any."""
    handle.seek(start - 1)
    if handle.read(1) == b"\n":
        return
    while True:
        rest = handle.readline(1 << 16)
        if not rest or rest.endswith(b"\n"):
            return


def iter_texts(
    path: Path, fmt: str, stats: CorpusStats, *, max_line_chars: int, start: int = 0, end: Optional[int] = None,
    reads: Optional[List[Tuple[Path, int, int]]] = None, strict_utf8: bool = False,
) -> Iterator[str]:
    """The text of each good line (txt), record (jsonl) or doc (spacy) of one file, or of the lines
    starting in [start, end) (``ReadRange``).

    reads (Optional[List]): where given, gets (path, first byte read, byte after the last read).
    strict_utf8 (bool): refuse a line that is not UTF-8 (``TextDecodeError``) instead of replacing its bytes.
    """
    if fmt == "spacy":
        yield from _iter_docbin_texts(path, stats)
        return
    with open_text(path) as handle:
        if start:
            _skip_partial_line(handle, start)
        lines = bounded_lines(handle, 4 * max_line_chars)
        number = 0
        while True:
            # the generator reads a line only when asked: here the handle stands at the next one
            if end is not None and handle.tell() >= end:
                break
            raw = next(lines, _END)
            if raw is _END:
                break
            stats.lines += 1
            number += 1
            if raw is None:
                stats.skip("too_long")
                continue
            # a byte range's line numbers count from its start: the place names the range's own line
            place = f"{path.name}:{number}" if not start else f"{path.name}, line {number} after byte {start}"
            line, replaced = decode_line(raw.rstrip(b"\n").rstrip(b"\r"), place=place, strict=strict_utf8)
            if replaced:
                stats.undecodable += 1
                stats.first_undecodable = stats.first_undecodable or place
            if len(line) > max_line_chars:
                stats.skip("too_long")
                continue
            if fmt == "jsonl":
                text = _jsonl_text(line, stats)
                if text is None:
                    continue
            else:
                text = line
            if not text.strip():
                stats.skip("empty")
                continue
            yield text.strip()
        if reads is not None:
            reads.append((path, max(start - 1, 0), handle.tell()))


def _jsonl_text(line: str, stats: CorpusStats) -> Optional[str]:
    if not line.strip():
        stats.skip("empty")
        return None
    try:
        record = json.loads(line)
    except json.JSONDecodeError:
        stats.skip("bad_json")
        return None
    text = record.get("text") if isinstance(record, dict) else None
    if not isinstance(text, str):
        stats.skip("no_text")
        return None
    return text


def _iter_docbin_texts(path: Path, stats: CorpusStats) -> Iterator[str]:
    # a DocBin is one serialized blob: bounded by the file, not by the corpus
    from spacy.tokens import DocBin
    from spacy.vocab import Vocab

    with CODECS.get(path.suffix, open)(path, "rb") as handle:  # binary by nature: no NUL check
        data = handle.read()
    for doc in DocBin().from_bytes(data).get_docs(Vocab()):
        stats.lines += 1
        words = [t.text for t in doc if not t.is_space]
        if not words:
            stats.skip("empty")
            continue
        # pre-tokenized: joined with single spaces and split again by the whitespace tokenizer
        yield " ".join(words)


def whitespace_tokenizer(text: str) -> List[str]:
    return text.split()


def make_tokenizer(name: str) -> Tokenizer:
    """"whitespace" splits on spaces; any other name is a spaCy language code (e.g. "en") whose tokenizer is used."""
    if name == "whitespace":
        return whitespace_tokenizer
    import spacy

    nlp = spacy.blank(name)

    def tokenize(text: str) -> List[str]:
        return [t.text for t in nlp.tokenizer(text) if not t.is_space]

    return tokenize


class Corpus:
    """A re-iterable stream of tokenized segments (sentences or paragraphs) from one or more files.

    paths (str | Path | Sequence): files, directories, globs (comma-separated or a list).
    fmt (str): "auto" (by suffix), "txt", "jsonl" or "spacy".
    tokenizer (str): "whitespace" or a spaCy language code.
    max_line_chars (int): longer lines are skipped as "too_long".
    strict_utf8 (bool): refuse a line that is not UTF-8, naming its file and line (default: its bad
        bytes replaced by U+FFFD, the line counted in ``stats.undecodable``).
    """

    def __init__(
        self,
        paths: Union[PathLike, Sequence[PathLike]],
        *,
        fmt: str = "auto",
        tokenizer: str = "whitespace",
        max_line_chars: int = 20000,
        strict_utf8: bool = False,
    ) -> None:
        self.files = resolve_paths(paths)
        self.fmt = fmt
        self.tokenizer_name = tokenizer
        self.tokenize = make_tokenizer(tokenizer)
        self.max_line_chars = max_line_chars
        self.strict_utf8 = strict_utf8
        self.stats = CorpusStats()
        # set to a list to record each range read: (path, first byte, byte after the last)
        self.reads: Optional[List[Tuple[Path, int, int]]] = None

    def texts(self, stats: Optional[CorpusStats] = None, *, files: Optional[Sequence[Path]] = None) -> Iterator[str]:
        """Good raw lines of ``files`` (default: all, in order)."""
        stats = self.stats if stats is None else stats
        for path in self.files if files is None else files:
            yield from iter_texts(path, file_format(path, self.fmt), stats, max_line_chars=self.max_line_chars, reads=self.reads,
                                  strict_utf8=self.strict_utf8)

    def segments(
        self,
        stats: Optional[CorpusStats] = None,
        *,
        files: Optional[Sequence[Path]] = None,
        shard: int = 0,
        n_shards: int = 1,
    ) -> Iterator[List[str]]:
        """Token lists of ``files`` (default: all, in order); with ``n_shards`` > 1 only rank
        ``shard``'s part, which it alone reads (``plan_reads``: byte ranges, or whole files), so
        read traffic does not grow with the ranks. Where no such plan exists (fewer compressed files
        than ranks) every rank reads all and keeps every n-th good line, starting at ``shard``.

        Lines are sharded before tokenizing, so each process tokenizes only its own part.
        """
        stats = self.stats if stats is None else stats
        files = self.files if files is None else files
        plan = plan_reads(files, self.fmt, shard, n_shards) if n_shards > 1 else None
        if plan is None:
            texts = (t for index, t in enumerate(self.texts(stats, files=files)) if index % n_shards == shard)
        else:
            texts = (
                text for part in plan for text in iter_texts(
                    part.path, file_format(part.path, self.fmt), stats, max_line_chars=self.max_line_chars,
                    start=part.start, end=part.end, reads=self.reads, strict_utf8=self.strict_utf8,
                )
            )
        for text in texts:
            tokens = self.tokenize(text)
            if not tokens:
                stats.skip("empty")
                continue
            stats.segments += 1
            stats.tokens += len(tokens)
            yield tokens


def split_long(segments: Iterable[List[str]], max_tokens: int) -> Iterator[List[str]]:
    """Cut segments longer than ``max_tokens`` into consecutive pieces (paragraph-per-line corpora)."""
    for tokens in segments:
        for start in range(0, len(tokens), max_tokens):
            yield tokens[start : start + max_tokens]
