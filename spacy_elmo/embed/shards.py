"""The files of an embedded corpus: the Parquet shards ``embed_corpus`` writes and reads back (one
shard's table, its name, writing it whole, verifying it on a rerun).

A shard is ``shard-FFFFF-BBBBB.parquet`` (block B of input file F) and ``shard-FFFFF-BBBBB.json``
(its row and token counts, lines that were not UTF-8, the SHA-256 of its input rows and of the
file). A number takes five digits up to 99999; a larger one is its digits after the letter that
counts them (``f`` for six, ``g`` for seven, ...: ``f100000``), so that names sort in input order
at any size and the five-digit names of earlier runs stay what they were. Each Parquet row holds ``id``, ``tokens``, ``token_start`` and
``token_end`` (character offsets in the line), and either ``layer_0`` ... ``layer_L`` or ``mix``,
each a list of per-token float16 or float32 vectors.
"""
import hashlib
import io
import json
import os
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np

from ..files import file_sha256, write_atomic

PathLike = Union[str, Path]
DTYPES = {"float32": np.float32, "float16": np.float16}
PLAIN_DIGITS = 5


def whitespace_tokens(text: str) -> Tuple[List[str], List[int], List[int]]:
    """The tokens of a line as `dump` splits it (``str.split()``), with their [start, end) offsets."""
    tokens, starts, ends = [], [], []
    position = 0
    for token in text.split():
        start = text.index(token, position)
        position = start + len(token)
        tokens.append(token)
        starts.append(start)
        ends.append(position)
    return tokens, starts, ends


def shard_table(
    elmo: Any, ids: Sequence[Any], texts: Sequence[str], *, layers: str, dtype: str, batch_size: int, metadata: Dict[str, str]
) -> Tuple[Any, int]:
    """One shard's rows as an Arrow table: the per-batch work, the same on Ray or on Spark.

    elmo (Elmo): the component (its pipeline's vocab makes the Docs).
    RETURNS (Tuple[pyarrow.Table, int]): the table and its number of tokens.
    """
    import pyarrow as pa
    from spacy.tokens import Doc

    split = [whitespace_tokens(text) for text in texts]
    docs = [Doc(elmo.vocab, words=tokens) for tokens, _, _ in split]
    outputs = [doc._.elmo for doc in elmo.pipe(docs, batch_size=batch_size)]
    width = outputs[0].width
    offsets = pa.array(np.cumsum([0] + [len(tokens) for tokens, _, _ in split]), type=pa.int32())

    def per_token(arrays: List[np.ndarray]) -> Any:
        values = np.concatenate([a.reshape(-1) for a in arrays]).astype(DTYPES[dtype], copy=False)
        return pa.ListArray.from_arrays(offsets, pa.FixedSizeListArray.from_arrays(pa.array(values), width))

    columns = {
        "id": pa.array(list(ids)),
        "tokens": pa.array([tokens for tokens, _, _ in split], type=pa.list_(pa.string())),
        "token_start": pa.array([starts for _, starts, _ in split], type=pa.list_(pa.int32())),
        "token_end": pa.array([ends for _, _, ends in split], type=pa.list_(pa.int32())),
    }
    if layers == "mix":
        columns["mix"] = per_token([output.mixed for output in outputs])
    else:
        for j in range(outputs[0].n_layers):
            columns[f"layer_{j}"] = per_token([output.layers[j] for output in outputs])
    table = pa.table(columns).replace_schema_metadata(metadata)
    return table, int(offsets[-1].as_py())


def _number(n: int) -> str:
    """``n`` in a shard's name: five digits, or its digits after the letter that counts them."""
    digits = str(n)
    if n < 0 or len(digits) > 26:
        raise ValueError(f"a shard's file or block number must be in [0, 10**26), not {n}")
    return digits.zfill(PLAIN_DIGITS) if len(digits) <= PLAIN_DIGITS else chr(ord("a") + len(digits) - 1) + digits


def shard_id(index: int, block: int) -> str:
    """The shard of block ``block`` of input file ``index``: ``FFFFF-BBBBB`` (wider numbers as
    ``_number`` writes them); ids sort as (file, block) do."""
    return f"{_number(index)}-{_number(block)}"


def shard_key(shard: str) -> Tuple[int, int]:
    """(file, block) of a shard id, as ``shard_id`` writes it or as plain digits of any width."""
    try:
        index, block = (int(part[1:] if part[:1].isalpha() else part) for part in shard.split("-"))
    except ValueError:
        raise ValueError(f"{shard!r} is not a shard id (FFFFF-BBBBB)") from None
    return index, block


def shard_name(shard: str) -> str:
    """The files' stem of shard ``FFFFF-BBBBB`` (block B of input file F; names sort in input order)."""
    return f"shard-{shard}"


def input_sha256(ids: Sequence[Any], texts: Sequence[str]) -> str:
    """SHA-256 of a shard's input rows: a rerun on a changed corpus is refused, not mixed in."""
    return hashlib.sha256(json.dumps([list(ids), list(texts)], default=str).encode("utf-8", "replace")).hexdigest()



def _adopt_plain_name(output: Path, shard: str) -> None:
    """Rename a shard written under plain digits (``100000``, as runs did before wider numbers got
    their letter) to its name now, so that such a run resumes rather than embeds it twice."""
    index, block = shard_key(shard)
    plain = shard_name(f"{index:05d}-{block:05d}")
    if plain == shard_name(shard) or not (output / f"{plain}.json").is_file():
        return
    try:
        record = json.loads((output / f"{plain}.json").read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return
    if (output / f"{plain}.parquet").is_file():
        # the record first: a crash in between leaves the plain record, so the next run adopts again
        write_atomic(output / f"{shard_name(shard)}.json", json.dumps({**record, "shard": shard}, indent=1).encode("utf-8"))
        os.replace(output / f"{plain}.parquet", output / f"{shard_name(shard)}.parquet")
    (output / f"{plain}.json").unlink()


def _record(output: Path, shard: str) -> Optional[Dict[str, Any]]:
    """A shard's JSON record, where it is there and readable and its Parquet file is there."""
    record_path = output / f"{shard_name(shard)}.json"
    if not (record_path.is_file() and (output / f"{shard_name(shard)}.parquet").is_file()):
        return None
    try:
        record = json.loads(record_path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    return record if isinstance(record, dict) else None


def shard_verified(output: Path, shard: str) -> bool:
    """Whether a shard's JSON record and Parquet file are there and the file still has the SHA-256
    the record gives (not missing, half-written or damaged)."""
    record = _record(output, shard)
    return record is not None and file_sha256(output / f"{shard_name(shard)}.parquet") == record.get("sha256")


def shard_done(output: Path, shard: str, expected_input: str) -> bool:
    """Whether a shard is written and verified (``shard_verified``) from this input (its record
    names these input rows; other rows are refused). A shard of an earlier run under plain digits
    is renamed first."""
    _adopt_plain_name(output, shard)
    record = _record(output, shard)
    if record is not None and record.get("input_sha256") != expected_input:
        raise ValueError(
            f"{output / shard_name(shard)}.json: written from other input rows than shard {shard} of this corpus; "
            "give a new --output folder, or delete this one, to embed a changed corpus"
        )
    return record is not None and shard_verified(output, shard)


def write_shard(
    output: Path, shard: str, table: Any, *, rows: int, tokens: int, input_sha256: str, undecodable: int = 0
) -> None:
    """Write one shard whole: its Parquet file, then the JSON that ``shard_done`` verifies it by
    (the input rows' SHA-256 and the file's), with its count of lines that were not all UTF-8."""
    import pyarrow.parquet as pq

    buffer = io.BytesIO()
    pq.write_table(table, buffer)
    data = buffer.getvalue()
    name = shard_name(shard)
    write_atomic(output / f"{name}.parquet", data)
    record = {
        "shard": shard, "rows": rows, "tokens": tokens, "undecodable": undecodable, "input_sha256": input_sha256,
        "sha256": hashlib.sha256(data).hexdigest(),
    }
    write_atomic(output / f"{name}.json", json.dumps(record, indent=1).encode("utf-8"))


def read_shards(output: PathLike) -> Iterator[Tuple[Any, List[str], np.ndarray]]:
    """Each row of a finished output folder, in input order: id, tokens and layers
    ((L+1, n_tokens, width) with ``layers="all"``, (n_tokens, width) with "mix")."""
    import pyarrow.parquet as pq

    for path in sorted(Path(output).glob("shard-*.parquet"), key=lambda path: shard_key(path.stem[len("shard-"):])):
        table = pq.read_table(path)
        names = [name for name in table.column_names if name.startswith("layer_") or name == "mix"]
        width = table.schema.field(names[0]).type.value_type.list_size
        for i, (row_id, tokens) in enumerate(zip(table.column("id").to_pylist(), table.column("tokens").to_pylist())):
            arrays = [table.column(name)[i].values.flatten().to_numpy().reshape(len(tokens), width) for name in names]
            yield row_id, tokens, arrays[0] if names == ["mix"] else np.stack(arrays)
