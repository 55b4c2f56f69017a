"""Text input, read one way by every command: files named by a path, a folder or a glob, plain or
compressed, one sentence or document a line.

- ``.gz``, ``.bz2`` and ``.xz`` files are decompressed as they are read, and ``.zst`` and ``.lz4``
  (as ``embed-corpus`` reads them) with pyarrow; any other file is read as is.
- A binary file (a NUL byte in the first ``BINARY_PROBE`` bytes, after decompression) is refused by
  name: an executable or a compressed file under another suffix would otherwise be read as lines
  of noise.
- Bytes that are not UTF-8 are replaced with U+FFFD and the lines holding them counted
  (``TextStats``), so that every line keeps its place (dump's dataset i is line i, a usage's
  ``FILE:LINE`` stays true); ``strict_utf8`` refuses the first such line instead, naming the file
  and the line.
- Lines are numbered from 1; a line's place is ``NAME:LINE``, NAME relative to the folder given.
- A folder is read for the files whose suffix names a format the command reads, plain or under one
  of the codecs' suffixes (``a.txt``, ``a.txt.gz``), hidden ones left out: ``TEXT_SUFFIXES``
  (``.txt``, ``.text``, ``.tokens``) for every command that reads lines of text; the training
  corpus reader (``pretrain``, ``finetune``, ``evaluate``) reads every file, as its format by suffix
  or text (the 1B Word Benchmark's shards have no suffix). So a ``.csv``, a ``.json`` or a README
  beside a corpus of lines never becomes corpus lines; the files left out are
  counted (``TextStats.skipped``, reported with the undecodable lines) and named where the folder
  holds nothing to read. A file named itself, or matched by a glob, is read whatever its name: the
  reader asked for it.
- What a pass keeps of what it finds is bounded: ``Reservoir`` is the one seeded sample of at most
  ``cap`` items from a stream of any length (the uses of a word, the rows of an index).
"""
import bz2
import glob
import gzip
import io
import json
import lzma
import random
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Callable, Dict, Generic, Iterator, List, Optional, Sequence, Tuple, TypeVar, Union

PathLike = Union[str, Path]
BINARY_PROBE = 8192
TEXT_SUFFIXES = (".txt", ".text", ".tokens")
Item = TypeVar("Item")


def _pyarrow_codec(codec: str) -> Callable[..., BinaryIO]:
    def open_compressed(path: PathLike, mode: str = "rb") -> BinaryIO:
        try:
            import pyarrow as pa
        except ImportError:
            raise ValueError(f"{path}: reading .{codec} files needs pyarrow: pip install pyarrow") from None
        return io.BufferedReader(pa.CompressedInputStream(pa.OSFile(str(path)), codec))

    return open_compressed


CODECS: Dict[str, Callable[..., BinaryIO]] = {
    ".gz": gzip.open, ".bz2": bz2.open, ".xz": lzma.open, ".zst": _pyarrow_codec("zstd"), ".lz4": _pyarrow_codec("lz4"),
}
STRICT_HINT = "run without --strict-utf8 to replace such bytes with U+FFFD (the lines are counted)"


class TextDecodeError(ValueError):
    """A line that is not UTF-8 where the reader was told to refuse such lines."""


class BinaryFileError(ValueError):
    """A file that holds binary data, not text."""


@dataclass(frozen=True)
class TextLine:
    """One line of text input.

    name (str): the file's name relative to what was given (its own name for a file).
    number (int): the line's number in its file, from 1.
    text (str): the line without its line break.
    """

    name: str
    number: int
    text: str

    @property
    def place(self) -> str:
        """RETURNS (str): ``NAME:LINE``, the line's id in every record."""
        return f"{self.name}:{self.number}"


@dataclass
class TextStats:
    """What a pass over text input read.

    files (int): files opened. lines (int): lines read.
    undecodable (int): lines holding bytes that are not UTF-8 (replaced with U+FFFD).
    first_undecodable (Optional[str]): the first such line's ``NAME:LINE``.
    """

    files: int = 0
    lines: int = 0
    undecodable: int = 0
    first_undecodable: Optional[str] = None
    skipped: int = 0

    def report(self) -> Optional[str]:
        """RETURNS (Optional[str]): one line on the undecodable lines and the files a folder held that
        are not text, None where there were none."""
        said = []
        if self.skipped:
            said.append(f"{self.skipped} file{'s' if self.skipped != 1 else ''} in input folders not read: "
                        "a folder is read for the files in the formats the command reads (docs/commands.md)")
        if self.undecodable:
            said.append(f"{self.undecodable} of {self.lines} lines held bytes that are not UTF-8, replaced by U+FFFD "
                        f"(the first: {self.first_undecodable}; --strict-utf8 refuses them)")
        return "\n".join(said) or None


def decode_line(raw: bytes, *, place: str, strict: bool) -> Tuple[str, bool]:
    """A line's text under the one policy for bytes that are not UTF-8.

    place (str): ``NAME:LINE``, for the error.
    strict (bool): raise TextDecodeError rather than replace the bad bytes.
    RETURNS (Tuple[str, bool]): the text, and whether bytes were replaced.
    """
    try:
        return raw.decode("utf-8"), False
    except UnicodeDecodeError as err:
        if strict:
            raise TextDecodeError(f"{place}: byte {err.start} is not UTF-8; fix or drop the line, or {STRICT_HINT}") from None
        return raw.decode("utf-8", "replace"), True


def read_in_folder(path: PathLike, suffixes: Optional[Sequence[str]] = TEXT_SUFFIXES) -> bool:
    """Whether a folder's file is read: its suffix, under one codec suffix at most, is one of
    ``suffixes`` (``a.txt``, ``a.txt.gz``; not ``a.csv``, ``a.json``, ``README``); every file where
    ``suffixes`` is None."""
    if suffixes is None:
        return True
    found = [s.lower() for s in Path(path).suffixes]
    if found and found[-1] in CODECS:
        found.pop()
    return bool(found) and found[-1] in suffixes


def text_files(
    spec: Union[PathLike, Sequence[PathLike]], *, suffixes: Optional[Sequence[str]] = TEXT_SUFFIXES,
    stats: Optional["TextStats"] = None
) -> List[Tuple[Path, str]]:
    """The files named by a path, a folder (the files below it that ``read_in_folder``, hidden ones
    left out), a glob, or a comma-separated list (or a list) of these.

    suffixes (Optional[Sequence[str]]): the formats a folder's files are read in (the module
        docstring); None: every file.
    stats (Optional[TextStats]): counts a folder's files left out (``skipped``).
    RETURNS (List[Tuple[Path, str]]): each file and its name relative to the folder or glob base, in
        order, sorted within each part. Raises FileNotFoundError naming a part that matches nothing.
    """
    parts = [p.strip() for p in str(spec).split(",")] if isinstance(spec, (str, Path)) else [str(p) for p in spec]
    found: Dict[Path, str] = {}
    for part in (p for p in parts if p):
        path = Path(part).expanduser()
        if path.is_file():
            found.setdefault(path, path.name)
        elif path.is_dir():
            visible = sorted(p for p in path.rglob("*") if p.is_file()
                             and not any(piece.startswith(".") for piece in p.relative_to(path).parts))
            below = [p for p in visible if read_in_folder(p, suffixes)]
            if not below:
                others = ", ".join(p.relative_to(path).as_posix() for p in visible[:5])
                raise FileNotFoundError(f"{part}: the folder holds no file to read (a folder is read for its "
                                        f"{', '.join(suffixes or ['visible'])} files, plain or compressed)"
                                        + (f"; it holds {others}{', ...' if len(visible) > 5 else ''}" if visible else ""))
            if stats is not None:
                stats.skipped += len(visible) - len(below)
            for p in below:
                found.setdefault(p, p.relative_to(path).as_posix())
        else:
            matched = sorted(Path(p) for p in glob.glob(str(path), recursive=True) if Path(p).is_file())
            if not matched:
                raise FileNotFoundError(f"{part}: no such file, folder or glob (give text, one sentence a line)")
            for p in matched:
                found.setdefault(p, p.name)
    return list(found.items())


def open_text(path: PathLike) -> BinaryIO:
    """A file's bytes, decompressed by its suffix, refused if binary (``BinaryFileError``).

    RETURNS (BinaryIO): a binary stream at the start of the text; close it.
    """
    path = Path(path)
    opener = CODECS.get(path.suffix.lower(), open)
    handle = opener(path, "rb")
    try:
        head = handle.peek(BINARY_PROBE)[:BINARY_PROBE] if hasattr(handle, "peek") else b""
    except (OSError, EOFError, lzma.LZMAError, zlib.error) as err:  # gzip.BadGzipFile and pyarrow's are OSErrors
        handle.close()
        raise BinaryFileError(f"{path}: not a readable {path.suffix} file ({err})") from None
    if b"\0" in head:
        handle.close()
        raise BinaryFileError(f"{path}: a binary file, not text (a NUL byte in its first {BINARY_PROBE} bytes); "
                              "give text, one sentence a line (plain, .gz, .bz2, .xz, .zst or .lz4)")
    return handle


def read_lines(
    spec: Union[PathLike, Sequence[PathLike]], *, strict_utf8: bool = False, stats: Optional[TextStats] = None
) -> Iterator[TextLine]:
    """Every line of the text input ``spec`` names (``text_files``), in order, numbered from 1.

    strict_utf8 (bool): refuse a line that is not UTF-8 (``TextDecodeError`` naming file and line).
    stats (Optional[TextStats]): counts what was read, undecodable lines included.
    RETURNS (Iterator[TextLine]): the lines, empty ones included (each keeps its number).
    """
    stats = TextStats() if stats is None else stats
    for path, name in text_files(spec, stats=stats):
        stats.files += 1
        with open_text(path) as handle:
            for number, raw in enumerate(_raw_lines(handle, path), start=1):
                stats.lines += 1
                place = f"{name}:{number}"
                text, replaced = decode_line(raw, place=place, strict=strict_utf8)
                if replaced:
                    stats.undecodable += 1
                    stats.first_undecodable = stats.first_undecodable or place
                yield TextLine(name, number, text)


def _raw_lines(handle: BinaryIO, path: Path) -> Iterator[bytes]:
    try:
        for raw in handle:
            yield raw.rstrip(b"\n").rstrip(b"\r")
    except (OSError, EOFError, lzma.LZMAError, zlib.error) as err:
        raise BinaryFileError(f"{path}: not a readable {path.suffix} file ({err})") from None


def read_sentences(
    path: PathLike, *, strict_utf8: bool = False, stats: Optional[TextStats] = None
) -> List[List[str]]:
    """Tokenized sentences: a ``.json`` list of token lists, or text, one whitespace-tokenized
    sentence a line (``read_lines``: an empty line is an empty sentence, so sentence i is line i + 1).

    RETURNS (List[List[str]]): the sentences. Raises ValueError for a .json of another shape.
    """
    path = Path(path)
    if path.suffix == ".json" and path.is_file():
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, list) or not all(isinstance(s, list) and all(isinstance(t, str) for t in s) for s in data):
            raise ValueError(f"{path}: a .json input must be a list of lists of token strings")
        return data
    return [line.text.split() for line in read_lines(path, strict_utf8=strict_utf8, stats=stats)]


class Reservoir(Generic[Item]):
    """A seeded uniform sample of at most ``cap`` items from a stream of any length (Vitter's
    algorithm R): memory holds ``cap`` items however many are offered, and the same stream and seed
    keep the same items.

    cap (int): most items kept. seed (str): the sample's seed (a word's own, so that its sample does
        not depend on what else was sampled beside it).
    """

    def __init__(self, cap: int, seed: str) -> None:
        if cap < 1:
            raise ValueError(f"a sample keeps at least 1 item, not {cap}")
        self.cap = cap
        self.seen = 0
        self.items: List[Tuple[int, Item]] = []
        self._random = random.Random(seed)

    def slot(self) -> Optional[int]:
        """Count one more item of the stream; RETURNS (Optional[int]): the place it takes in the
        sample (``put`` it there), or None where it is not kept."""
        self.seen += 1
        if len(self.items) < self.cap:
            return len(self.items)
        chosen = self._random.randrange(self.seen)
        return chosen if chosen < self.cap else None

    def put(self, place: int, item: Item) -> None:
        """Keep ``item``, the stream's latest, at ``place`` (``slot``'s answer)."""
        entry = (self.seen - 1, item)
        if place == len(self.items):
            self.items.append(entry)
        else:
            self.items[place] = entry

    def offer(self, item: Item) -> bool:
        """``slot`` then ``put``: RETURNS (bool) whether the item was kept."""
        place = self.slot()
        if place is not None:
            self.put(place, item)
        return place is not None

    def kept(self) -> List[Item]:
        """RETURNS (List[Item]): the kept items in stream order."""
        return [item for _, item in sorted(self.items, key=lambda entry: entry[0])]
