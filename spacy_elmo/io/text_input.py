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
"""
import bz2
import glob
import gzip
import io
import json
import lzma
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Callable, Dict, Iterator, List, Optional, Sequence, Tuple, Union

PathLike = Union[str, Path]
BINARY_PROBE = 8192


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

    def report(self) -> Optional[str]:
        """RETURNS (Optional[str]): one line on the undecodable lines, None where there were none."""
        if not self.undecodable:
            return None
        return (f"{self.undecodable} of {self.lines} lines held bytes that are not UTF-8, replaced by U+FFFD "
                f"(the first: {self.first_undecodable}; --strict-utf8 refuses them)")


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


def text_files(spec: Union[PathLike, Sequence[PathLike]]) -> List[Tuple[Path, str]]:
    """The files named by a path, a folder (every file below it, hidden ones left out), a glob, or a
    comma-separated list (or a list) of these.

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
            below = sorted(p for p in path.rglob("*") if p.is_file()
                           and not any(piece.startswith(".") for piece in p.relative_to(path).parts))
            if not below:
                raise FileNotFoundError(f"{part}: the folder holds no files")
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
    for path, name in text_files(spec):
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
