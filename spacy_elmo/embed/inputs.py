"""The input of an embedded corpus where it lies: files named by a path, a directory, a glob or a
URI that pyarrow's filesystems read (local, ``s3://``, ``gs://``, ``hdfs://``), cut into blocks of
rows where they are read.

Only the listing happens where ``resolve_inputs`` runs (the driver); ``file_blocks`` reads one
file as a stream, one block of rows at a time, on whichever worker reads it, so no process holds
more than a block. Text is one record a line (``\\n``-separated, a trailing ``\\r`` dropped),
``.gz`` and the other codecs pyarrow infers from the suffix decompressed on the fly; Parquet needs a
``text`` column and may have an ``id`` column. A record's place is its file (its name relative to
what was given) and its line or row number from 1 (as every command numbers lines), the same on
every rerun; bytes that are not UTF-8 follow the one policy of ``io.text_input.decode_line``.
"""
import fnmatch
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, List, Optional, Tuple

from ..io.text_input import TextDecodeError as CorpusDecodeError  # noqa: F401  (the name embed/ raises it by)
from ..io.text_input import BINARY_PROBE, BinaryFileError, decode_line

GLOB_CHARS = "*?["
READ_CHUNK = 1 << 20


@dataclass(frozen=True)
class CorpusFiles:
    """The files of a corpus input, listed once by the driver.

    filesystem (pyarrow.fs.FileSystem): where they are read.
    paths (List[str]): each file's path on that filesystem, sorted.
    names (List[str]): each file's name as recorded (relative to the directory or glob's base).
    sizes (List[int]): each file's size in bytes, as stored (compressed, for ``.gz``).
    kind (str): "text" or "parquet".
    mtimes (List[Optional[int]]): each file's modification time in nanoseconds, where the
        filesystem gives one.
    """

    filesystem: Any
    paths: List[str]
    names: List[str]
    sizes: List[int]
    kind: str
    mtimes: List[Optional[int]]

    @property
    def sha256(self) -> str:
        """SHA-256 of the names and sizes: a rerun on other files into the same folder is refused."""
        return hashlib.sha256(json.dumps([self.names, self.sizes]).encode("utf-8")).hexdigest()


def _filesystem(spec: str) -> Tuple[Any, str]:
    """The filesystem and path of a URI, or of a local path (relative ones resolved here)."""
    from pyarrow import ArrowException, fs

    if "://" in spec:
        try:
            return fs.FileSystem.from_uri(spec)
        except (ArrowException, OSError) as err:  # ArrowInvalid, ArrowNotImplementedError, or the store's error
            raise ValueError(f"{spec}: pyarrow cannot open this URI ({err})") from None
    return fs.LocalFileSystem(), Path(spec).expanduser().resolve().as_posix()


def resolve_inputs(spec: str) -> CorpusFiles:
    """The files named by ``spec``: a file, a directory (every file below it, names starting with
    "." or "_" left out, as Spark's and Hadoop's markers are), or a glob (``*`` matching across
    folders), each local or a URI.

    RETURNS (CorpusFiles): the files, sorted. Raises FileNotFoundError when nothing matches, and
        ValueError for text and Parquet mixed.
    """
    from pyarrow import fs

    filesystem, path = _filesystem(str(spec))
    parts = path.split("/")
    globbed = next((i for i, part in enumerate(parts) if any(c in part for c in GLOB_CHARS)), None)
    base = "/".join(parts[:globbed]) if globbed is not None else path
    try:  # a store that cannot be reached or read says so in its own words, naming the input
        info = filesystem.get_file_info(base)
        listing = filesystem.get_file_info(fs.FileSelector(base, recursive=True)) if info.type == fs.FileType.Directory else []
    except OSError as err:
        raise ValueError(f"{spec}: cannot list the input ({err})") from None
    if globbed is None and info.type == fs.FileType.File:
        found = [(path, Path(path).name, info.size, info.mtime_ns)]
    elif info.type == fs.FileType.Directory:
        found = [
            (item.path, item.path[len(base):].lstrip("/"), item.size, item.mtime_ns)
            for item in listing
            if item.type == fs.FileType.File
            and (globbed is not None or not any(p.startswith((".", "_")) for p in item.path[len(base):].split("/") if p))
            and (globbed is None or fnmatch.fnmatchcase(item.path, path))
        ]
    else:
        found = []
    if not found:
        raise FileNotFoundError(f"{spec}: no input file there (give a file, a directory, a glob or a URI)")
    found.sort()
    parquet = [p.endswith(".parquet") for p, *_ in found]
    if any(parquet) and not all(parquet):
        raise ValueError(f"{spec}: mixes Parquet and text files; give one kind")
    return CorpusFiles(
        filesystem=filesystem, paths=[p for p, *_ in found], names=[n for _, n, *_ in found],
        sizes=[int(s) for _, _, s, _ in found], kind="parquet" if all(parquet) else "text",
        mtimes=[None if m is None else int(m) for *_, m in found],
    )


class CorpusReadError(ValueError):
    """An input file that cannot be read to its end (a truncated or damaged archive, a read error)."""


def _read(stream: Any, name: str, lines: int) -> bytes:
    """The next chunk of ``stream``; a failed read raises CorpusReadError naming the file and where
    the damage lies (a truncated ``.gz`` fails here, in the codec)."""
    from pyarrow import ArrowException

    try:
        return stream.read(READ_CHUNK)
    except (OSError, EOFError, ArrowException) as err:
        # A codec fails the whole chunk it was asked for, so the damage is known only to lie in it:
        # naming the last line before the chunk as the last readable one would send the user to look
        # at the wrong place (a file cut after thousands of lines would read as unreadable from line 1).
        where = (f"in its first {READ_CHUNK >> 20} MiB of text" if lines == 0
                 else f"after line {lines}, within the next {READ_CHUNK >> 20} MiB of text")
        reason = str(err).strip().splitlines()[0] if str(err).strip() else "read failed"
        raise CorpusReadError(f"{name}: cannot be read to its end, damaged {where} ({type(err).__name__}: {reason})") from None


def _lines(stream: Any, name: str) -> Iterator[bytes]:
    """The ``\\n``-separated lines of a binary stream, read a chunk at a time (a trailing ``\\r`` dropped);
    a binary file (a NUL byte in its first block, as ``io.text_input`` tells) is refused by ``name``,
    and one that cannot be read to its end raises CorpusReadError naming it."""
    pending, first, count = b"", True, 0
    while True:
        chunk = _read(stream, name, count)
        if not chunk:
            break
        if first and b"\0" in chunk[:BINARY_PROBE]:
            raise BinaryFileError(f"{name}: a binary file, not text (a NUL byte in its first {BINARY_PROBE} bytes); "
                                  "give text, one record a line, or .parquet files")
        first = False
        pieces = (pending + chunk).split(b"\n")
        pending = pieces.pop()
        for piece in pieces:
            count += 1
            yield piece[:-1] if piece.endswith(b"\r") else piece
    if pending:
        yield pending[:-1] if pending.endswith(b"\r") else pending


def text_blocks(stream: Any, *, name: str, rows: int, strict: bool) -> Iterator[Tuple[int, List[Any], List[str], int]]:
    """Blocks of ``rows`` lines of a text stream.

    name (str): the file's recorded name, for ids and errors.
    strict (bool): raise CorpusDecodeError at the first line that is not UTF-8, rather than
        replace its bad bytes with U+FFFD and count the line.
    RETURNS (Iterator): (the block's first row from 0, ids ``name:line`` with lines from 1, texts,
        lines with bad bytes).
    """
    first, texts, bad = 0, [], 0
    for number, raw in enumerate(_lines(stream, name), start=1):
        text, replaced = decode_line(raw, place=f"{name}:{number}", strict=strict)
        bad += replaced
        texts.append(text)
        if len(texts) == rows:
            yield first, [f"{name}:{first + i + 1}" for i in range(len(texts))], texts, bad
            first, texts, bad = first + len(texts), [], 0
    if texts:
        yield first, [f"{name}:{first + i + 1}" for i in range(len(texts))], texts, bad


def parquet_blocks(source: Any, *, name: str, rows: int) -> Iterator[Tuple[int, List[Any], List[str], int]]:
    """Blocks of ``rows`` rows of a Parquet file (random access), as ``text_blocks`` yields them;
    ids from its ``id`` column, else ``name:row`` (rows from 1); a null text is an empty line."""
    import pyarrow.parquet as pq

    from pyarrow import ArrowException

    try:
        handle = pq.ParquetFile(source)
    except (OSError, ArrowException) as err:
        raise CorpusReadError(f"{name}: not a Parquet file that can be read ({type(err).__name__}: {err})") from None
    names = handle.schema_arrow.names
    if "text" not in names:
        raise ValueError(f"{name}: a Parquet input needs a 'text' column (it has {names})")
    first = 0
    for batch in handle.iter_batches(batch_size=rows, columns=[c for c in ("id", "text") if c in names]):
        texts = ["" if text is None else text for text in batch.column("text").to_pylist()]
        ids = batch.column("id").to_pylist() if "id" in names else [f"{name}:{first + i + 1}" for i in range(len(texts))]
        yield first, ids, texts, 0
        first += len(texts)


def open_input(files: CorpusFiles, path: str, name: str) -> Any:
    """One input file opened for reading: Parquet for random access, text as a stream decompressed
    by its suffix (.gz, .bz2, .zst, ...); one that cannot be opened raises CorpusReadError naming it."""
    from pyarrow import ArrowException

    try:
        if files.kind == "parquet":
            return files.filesystem.open_input_file(path)
        return files.filesystem.open_input_stream(path, compression="detect")
    except (OSError, ArrowException) as err:
        raise CorpusReadError(f"{name}: cannot be opened ({type(err).__name__}: {err})") from None


def file_blocks(files: CorpusFiles, index: int, *, rows: int, strict: bool, stream: Optional[Any] = None) -> Iterator[Tuple[int, List[Any], List[str], int]]:
    """Blocks of one input file, opened here unless ``stream`` is given (Ray Data opens its own).

    index (int): the file's place in ``files``.
    RETURNS (Iterator): as ``text_blocks``.
    """
    path, name = files.paths[index], files.names[index]
    if stream is None:
        stream = open_input(files, path, name)
    if files.kind == "parquet":
        yield from parquet_blocks(stream, name=name, rows=rows)
        return
    with stream:
        yield from text_blocks(stream, name=name, rows=rows, strict=strict)

