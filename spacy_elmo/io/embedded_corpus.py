"""An ``embed-corpus`` output folder read back: the layout the writer (``embed/shards.py``) and every
reader share, and the rows of a finished folder with their stored layers, for the commands that
start from a corpus embedded once (``usage/``: ``usages``, ``change``, ``senses``).

The folder is a Parquet dataset of ``shard-FFFFF-BBBBB.parquet`` files, one row a line, its
bookkeeping under ``_embed-corpus`` (which Parquet readers skip). A layer column holds a line's
(n_tokens, width) vectors flattened, as float32, float16, or bfloat16's 16 bits (uint16).
"""
import json
from pathlib import Path
from typing import Any, Dict, Iterator, List, NamedTuple, Sequence, Tuple, Union

import numpy as np

PathLike = Union[str, Path]
RECORDS = "_embed-corpus"
SETTINGS_FILE = "settings.json"
FINISHED_FILE = "finished.json"


def is_layer_column(name: str) -> bool:
    """Whether a column holds stored layers (``layer_J``, ``mean``, ``mix``), not a row's place or tokens."""
    return name.startswith("layer_") or name in ("mean", "mix")


def shard_key(shard: str) -> Tuple[int, int]:
    """(file, block) of a shard id (``FFFFF-BBBBB``; a number past five digits after the letter that
    counts its digits, ``f100000``), or of plain digits of any width."""
    try:
        index, block = (int(part[1:] if part[:1].isalpha() else part) for part in shard.split("-"))
    except ValueError:
        raise ValueError(f"{shard!r} is not a shard id (FFFFF-BBBBB)") from None
    return index, block


def shard_files(folder: PathLike) -> List[Path]:
    """A folder's Parquet shards in input order."""
    return sorted(Path(folder).glob("shard-*.parquet"), key=lambda path: shard_key(path.stem[len("shard-"):]))


def float_values(cell: Any, dtype: str) -> np.ndarray:
    """A stored cell's values (a flat array) back as float32."""
    values = np.asarray(cell)
    if dtype == "bfloat16":
        return (values.astype(np.uint32) << 16).view(np.float32)
    return values.astype(np.float32, copy=False)


class EmbeddedFolder(NamedTuple):
    """A finished ``embed-corpus`` output folder, as a reader of its rows needs it.

    path (Path). model (str), weights_sha256 (str): the biLM it was embedded with. layers (str): as
    given to the run. columns (List[str]): the layer columns stored. dtype (str). width (int): a
    vector's width. n_layers (int): the biLM's output layers.
    """

    path: Path
    model: str
    weights_sha256: str
    layers: str
    columns: List[str]
    dtype: str
    width: int
    n_layers: int


def is_embedded_folder(path: PathLike) -> bool:
    """Whether ``path`` is an ``embed-corpus`` output folder (finished or not)."""
    return (Path(path) / RECORDS / SETTINGS_FILE).is_file()


def _check_shards_recorded(path: Path, shards: Sequence[Path]) -> None:
    """Refuse a finished folder whose shards are not those its run recorded (one deleted or moved
    away since, or one added): its rows would be a part of the corpus, or another corpus's, read as
    the whole without a word. Only names are compared; a shard's bytes are checked by embed-corpus."""
    try:
        record = json.loads((path / RECORDS / FINISHED_FILE).read_text(encoding="utf-8"))
        counts, files, rows = record.get("shards"), record.get("files"), int(record["settings"]["shard_rows"])
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, AttributeError, KeyError, TypeError, ValueError):
        counts = None
    if not isinstance(counts, list) or not isinstance(files, list) or len(files) != len(counts):
        raise ValueError(f"{path}: {RECORDS}/{FINISHED_FILE} cannot be read as embed-corpus writes it; run the same "
                         "embed-corpus command again to check the shards and write it")
    expected = {(index, block) for index, count in enumerate(counts) for block in range(int(count))}
    found = {shard_key(shard.stem[len("shard-"):]): shard.name for shard in shards}
    missing = sorted(expected - found.keys())
    extra = sorted(found[key] for key in found.keys() - expected)
    if missing:
        index, block = missing[0]
        raise ValueError(f"{path}: {len(missing)} of the {len(expected)} shards its run wrote are missing (the first: "
                         f"rows {block * rows + 1} to {(block + 1) * rows} of {files[index][0]}), so its rows hold only part "
                         "of the corpus; run the same embed-corpus command again to write them")
    if extra:
        raise ValueError(f"{path}: holds shards its run did not write ({', '.join(extra[:3])}"
                         f"{', ...' if len(extra) > 3 else ''}); move them away or embed into a new folder")


def embedded_folder(path: PathLike) -> EmbeddedFolder:
    """A finished ``embed-corpus`` output folder's settings, from its shards' metadata.

    RETURNS (EmbeddedFolder): raises ValueError where the run has not finished (its rows would be
    a part of the corpus) or the folder holds no shard.
    """
    import pyarrow.parquet as pq

    path = Path(path)
    if not (path / RECORDS / FINISHED_FILE).is_file():
        raise ValueError(f"{path}: embed-corpus has not finished there (no {RECORDS}/{FINISHED_FILE}), so its shards "
                         "hold only part of the corpus; run the same embed-corpus command to the end first")
    shards = shard_files(path)
    if not shards:
        raise ValueError(f"{path}: an embed-corpus folder without shards")
    _check_shards_recorded(path, shards)
    meta = {key.decode(): value.decode() for key, value in (pq.read_schema(shards[0]).metadata or {}).items()}
    return EmbeddedFolder(
        path=path, model=meta["spacy_elmo.model"], weights_sha256=meta["spacy_elmo.weights_sha256"],
        layers=meta["spacy_elmo.layers"], columns=json.loads(meta["spacy_elmo.columns"]), dtype=meta["spacy_elmo.dtype"],
        width=int(meta["spacy_elmo.width"]), n_layers=int(meta["spacy_elmo.n_layers"]),
    )


class EmbeddedRow(NamedTuple):
    """One line of an embedded folder: id, tokens, their offsets, and the asked-for layer columns
    as (n_tokens, width) arrays in the stored dtype (``float_values`` turns a vector to float32)."""

    id: Any
    tokens: List[str]
    starts: List[int]
    ends: List[int]
    layers: Dict[str, np.ndarray]


def embedded_rows(folder: EmbeddedFolder, columns: Sequence[str] = ()) -> Iterator[EmbeddedRow]:
    """Every row of a folder in input order, one shard in memory at a time.

    columns (Sequence[str]): the layer columns to read (views into the shard's values, no copy).
    """
    import pyarrow.parquet as pq

    for path in shard_files(folder.path):
        table = pq.read_table(path, columns=["id", "tokens", "token_start", "token_end", *columns])
        values = {}
        for column in columns:
            array = table.column(column).combine_chunks()
            values[column] = (array.offsets.to_numpy(), array.values.to_numpy(zero_copy_only=False))
        places = zip(*(table.column(c).to_pylist() for c in ("id", "tokens", "token_start", "token_end")))
        for i, (row_id, tokens, starts, ends) in enumerate(places):
            layers = {column: flat[offsets[i] : offsets[i + 1]].reshape(-1, folder.width)
                      for column, (offsets, flat) in values.items()}
            yield EmbeddedRow(row_id, tokens, starts, ends, layers)
