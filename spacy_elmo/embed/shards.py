"""The files of an embedded corpus: the Parquet shards ``embed_corpus`` writes and reads back (one
shard's table, its name, writing it whole, verifying it on a rerun).

The output folder is a Parquet dataset: ``pd.read_parquet(folder)``,
``pyarrow.dataset.dataset(folder)`` and Spark read the shards ``shard-FFFFF-BBBBB.parquet`` (block B
of input file F) and skip the bookkeeping, which lies in the subfolder ``_embed-corpus`` (readers
leave out names that start with ``_`` or ``.``): the run's settings, the record of a finished run,
and one JSON record a shard (its row and token counts, lines that were not UTF-8, the SHA-256 of its
input rows and of the file). A number takes five digits up to 99999; a larger one is its digits
after the letter that counts them (``f`` for six, ``g`` for seven, ...: ``f100000``), so that names
sort in input order at any size.

Each Parquet row is one input line: ``id`` (``FILE:LINE``, or a Parquet input's own id), ``file``
and ``line`` (from 1), ``tokens``, ``token_start`` and ``token_end`` (character offsets in the
line), ``sentence_starts`` (the token where each sentence begins: ``[0]`` where the pipeline splits
none) and ``window_starts`` (the token where each run of the biLM begins: a sentence, or a window
of ``max_window`` tokens of a longer one), and the stored layers, one column each (``layer_J``,
``mean`` or ``mix``: ``select_columns``), each the line's (n_tokens, width) vectors flattened, so that
``np.asarray(row.layer_2).reshape(-1, width)`` gives them back (``width``: the metadata's
``spacy_elmo.width``). bfloat16, which Parquet
has no type for, is stored as its 16 bits (uint16): ``(cell.astype(np.uint32) << 16).view(np.float32)``
gives the float32 values. The schema's metadata holds the model, its weights' SHA-256, the layers,
the dtype, the width and the component's mix (``spacy_elmo.*``).
"""
import hashlib
import io
import json
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np

from ..files import file_sha256, write_atomic
from ..io.embedded_corpus import RECORDS, float_values, is_layer_column, shard_files, shard_key

PathLike = Union[str, Path]
DTYPES = ("float32", "float16", "bfloat16")
# Parquet codecs; zstd (with the floats' bytes split into streams) is the default: results/bench/*/embed-sizing.json
COMPRESSIONS = ("zstd", "snappy", "gzip", "lz4", "brotli", "none")
PLAIN_DIGITS = 5
LAYOUT = 2
LAYER_WORDS = ("all", "mix", "top", "mean")


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


def check_layers(layers: str) -> None:
    """Refuse a ``--layers`` value outside the vocabulary (all, mix, top, mean, an index, a
    comma-separated list of indices), before any model is loaded."""
    if layers in LAYER_WORDS:
        return
    parts = [part.strip() for part in str(layers).split(",")]
    if not all(part.lstrip("-").isdigit() for part in parts):
        raise ValueError(f"layers must be all, mix, top, mean, a layer index or a list of them (0,2), not {layers!r}")


def select_columns(layers: str, n_layers: int) -> List[str]:
    """The columns ``layers`` stores for a model of ``n_layers`` output layers: ``layer_J`` for each
    layer (all; top: the last; an index or a list, negative ones from the top), or ``mean`` (of all
    layers, equal weights) or ``mix`` (the component's own mix).

    RETURNS (List[str]): in storing order; raises ValueError for an index the model does not have.
    """
    check_layers(layers)
    if layers in ("mix", "mean"):
        return [layers]
    if layers == "all":
        return [f"layer_{j}" for j in range(n_layers)]
    if layers == "top":
        return [f"layer_{n_layers - 1}"]
    columns = []
    for part in str(layers).split(","):
        index = int(part)
        if not -n_layers <= index < n_layers:
            raise ValueError(f"layers {layers!r}: this model has {n_layers} layers (0 to {n_layers - 1}; -1 = top)")
        column = f"layer_{index % n_layers}"
        if column not in columns:
            columns.append(column)
    return columns


def layer_column(output: Any, column: str) -> np.ndarray:
    """One stored column's (n_tokens, width) float32 values of a Doc's ``ElmoOutput``."""
    if column == "mix":
        return output.mixed
    if column == "mean":
        return output.layers.mean(axis=0)
    return output.layers[int(column[len("layer_"):])]


def stored_values(values: np.ndarray, dtype: str) -> np.ndarray:
    """float32 values as stored: float32, float16, or bfloat16's 16 bits as uint16 (rounded to
    nearest even, as torch rounds)."""
    if dtype == "bfloat16":
        import torch

        return torch.from_numpy(np.ascontiguousarray(values, dtype=np.float32)).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
    return values.astype(np.float32 if dtype == "float32" else np.float16, copy=False)


def mix_record(output: Any) -> Dict[str, Any]:
    """The component's mix as the metadata records it: the softmax weights, gamma, and whether each
    layer's mean is taken off first (the model's vector setting)."""
    from ..bilm.scalar_mix import softmax_weights

    return {"weights": [float(w) for w in softmax_weights(output.mix_weights, output.n_layers)], "gamma": float(output.gamma),
            "centered": output.layer_means is not None}


def line_docs(nlp: Any, elmo: Any, texts: Sequence[str], batch_size: int) -> Tuple[List[Any], List[Tuple[List[str], List[int], List[int]]]]:
    """The Docs of a shard's lines, whitespace-tokenized, through the pipeline's components up to and
    including ``elmo`` (a sentence splitter before it makes the biLM run sentence by sentence).

    RETURNS: the Docs and each line's (tokens, starts, ends).
    """
    from spacy.tokens import Doc

    split = [whitespace_tokens(text) for text in texts]
    docs: Any = (Doc(elmo.vocab, words=tokens) for tokens, _, _ in split)
    for _, pipe in nlp.pipeline if nlp is not None else [(None, elmo)]:
        docs = pipe.pipe(docs, batch_size=batch_size)
        if pipe is elmo:
            break
    return list(docs), split


def shard_table(
    elmo: Any, ids: Sequence[Any], texts: Sequence[str], *, columns: Sequence[str], dtype: str, batch_size: int,
    metadata: Dict[str, str], file: str = "", first_line: int = 1, nlp: Any = None,
) -> Tuple[Any, int]:
    """One shard's rows as an Arrow table: the per-batch work, the same on Ray or on Spark.

    elmo (Elmo): the component (its pipeline's vocab makes the Docs). columns (Sequence[str]): the
    layer columns (``select_columns``). file (str), first_line (int): the input file's name and the
    shard's first line number (from 1). nlp (Optional[Language]): the pipeline whose components before
    ``elmo`` run first.
    RETURNS (Tuple[pyarrow.Table, int]): the table and its number of tokens.
    """
    docs, split = line_docs(nlp, elmo, texts, batch_size)
    return docs_table(docs, split, ids, columns=columns, dtype=dtype, metadata=metadata, file=file,
                      first_line=first_line)


def docs_table(
    docs: Sequence[Any], split: Sequence[Tuple[List[str], List[int], List[int]]], ids: Sequence[Any], *,
    columns: Sequence[str], dtype: str, metadata: Dict[str, str], file: str = "", first_line: int = 1,
) -> Tuple[Any, int]:
    """The table of embedded Docs (``line_docs``' answer), as ``shard_table`` describes it."""
    import pyarrow as pa

    outputs = [doc._.elmo for doc in docs]
    lengths = [len(tokens) for tokens, _, _ in split]
    width = outputs[0].width
    offsets = pa.array(np.cumsum([0] + [n * width for n in lengths]), type=pa.int64())

    def flat(column: str) -> Any:
        values = np.concatenate([layer_column(output, column).reshape(-1) for output in outputs])
        return pa.LargeListArray.from_arrays(offsets, pa.array(stored_values(values, dtype)))

    table = {
        "id": pa.array(list(ids)),
        "file": pa.array([file] * len(ids), type=pa.string()),
        "line": pa.array(range(first_line, first_line + len(ids)), type=pa.int64()),
        "tokens": pa.array([tokens for tokens, _, _ in split], type=pa.list_(pa.string())),
        "token_start": pa.array([starts for _, starts, _ in split], type=pa.list_(pa.int32())),
        "token_end": pa.array([ends for _, _, ends in split], type=pa.list_(pa.int32())),
        "sentence_starts": pa.array([[s.start for s in doc.sents] if doc.has_annotation("SENT_START") else [0][: len(doc)]
                                     for doc in docs], type=pa.list_(pa.int32())),
        "window_starts": pa.array([[start for start, _ in output.segments] for output in outputs], type=pa.list_(pa.int32())),
        **{column: flat(column) for column in columns},
    }
    shard_metadata = {**metadata, "spacy_elmo.width": str(width), "spacy_elmo.n_layers": str(outputs[0].n_layers),
                      "spacy_elmo.mix": json.dumps(mix_record(outputs[0]))}
    return pa.table(table).replace_schema_metadata(shard_metadata), int(sum(lengths))


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


def shard_name(shard: str) -> str:
    """The files' stem of shard ``FFFFF-BBBBB`` (block B of input file F; names sort in input order)."""
    return f"shard-{shard}"


def record_path(output: Path, shard: str) -> Path:
    """Where a shard's JSON record lies: in the bookkeeping folder, which dataset readers skip."""
    return output / RECORDS / f"{shard_name(shard)}.json"


def written_shards(output: Path) -> List[str]:
    """The ids of the shards whose record is written, in input order."""
    found = [path.stem[len("shard-"):] for path in (output / RECORDS).glob("shard-*.json")]
    return sorted(found, key=shard_key)


def input_sha256(ids: Sequence[Any], texts: Sequence[str]) -> str:
    """SHA-256 of a shard's input rows: a rerun on a changed corpus is refused, not mixed in."""
    return hashlib.sha256(json.dumps([list(ids), list(texts)], default=str).encode("utf-8", "replace")).hexdigest()


def _record(output: Path, shard: str) -> Optional[Dict[str, Any]]:
    """A shard's JSON record, where it is there and readable and its Parquet file is there."""
    path = record_path(output, shard)
    if not (path.is_file() and (output / f"{shard_name(shard)}.parquet").is_file()):
        return None
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
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
    names these input rows; other rows are refused)."""
    record = _record(output, shard)
    if record is not None and record.get("input_sha256") != expected_input:
        raise ValueError(
            f"{record_path(output, shard)}: written from other input rows than shard {shard} of this corpus; "
            "give a new --output folder, or delete this one, to embed a changed corpus"
        )
    return record is not None and shard_verified(output, shard)


def parquet_bytes(table: Any, compression: str, *, split: bool = True) -> bytes:
    """A table as a Parquet file's bytes, under ``compression`` (``COMPRESSIONS``).

    The float layers are written without a dictionary (their values hardly repeat: pyarrow's
    default dictionary, given up after a page, cost 6 to 26% more than plain values in
    ``bench/bench_embed_sizing.py``'s first runs) and, under a codec and unless ``split`` is False,
    with their bytes split into streams (Parquet's BYTE_STREAM_SPLIT: the floats' sign-and-exponent
    bytes together, which is what a codec finds to compress). Strings, offsets and bfloat16's 16-bit
    patterns keep the dictionary, where it pays.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    def leaf(name: str) -> str:
        kind = table.schema.field(name).type
        return f"{name}.list.element" if pa.types.is_list(kind) or pa.types.is_large_list(kind) else name

    floats = [name for name in table.column_names
              if is_layer_column(name) and pa.types.is_floating(table.schema.field(name).type.value_type)]
    options: Dict[str, Any] = {"compression": compression,
                               "use_dictionary": [leaf(name) for name in table.column_names if name not in floats]}
    if compression != "none" and split:
        options["use_byte_stream_split"] = [leaf(name) for name in floats]
    buffer = io.BytesIO()
    pq.write_table(table, buffer, **options)
    return buffer.getvalue()


def write_shard(
    output: Path, shard: str, table: Any, *, rows: int, tokens: int, input_sha256: str, undecodable: int = 0,
    compression: str = "zstd", file: str = "",
) -> None:
    """Write one shard whole: its Parquet file, then the JSON that ``shard_done`` verifies it by
    (the input rows' SHA-256 and the file's), with its count of lines that were not all UTF-8.

    compression (str): the Parquet codec (``COMPRESSIONS``); with a codec the layers' bytes are
        split into streams first (Parquet's BYTE_STREAM_SPLIT), which is what lets floats compress.
    """
    data = parquet_bytes(table, compression)
    write_atomic(output / f"{shard_name(shard)}.parquet", data)
    record = {
        "shard": shard, "file": file, "rows": rows, "tokens": tokens, "undecodable": undecodable,
        "input_sha256": input_sha256, "sha256": hashlib.sha256(data).hexdigest(),
    }
    path = record_path(output, shard)
    path.parent.mkdir(exist_ok=True)
    write_atomic(path, json.dumps(record, indent=1).encode("utf-8"))


def read_shards(output: PathLike) -> Iterator[Tuple[Any, List[str], np.ndarray]]:
    """Each row of an output folder, in input order: id, tokens and layers as float32
    ((n_columns, n_tokens, width) for several layer columns, (n_tokens, width) for one), the
    folder's layout now or the earlier one (lists of per-token vectors).
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    for path in shard_files(output):
        table = pq.read_table(path)
        metadata = table.schema.metadata or {}
        dtype = metadata.get(b"spacy_elmo.dtype", b"float32").decode()
        names = [name for name in table.column_names if is_layer_column(name)]
        value_type = table.schema.field(names[0]).type.value_type
        width = value_type.list_size if pa.types.is_fixed_size_list(value_type) else int(metadata[b"spacy_elmo.width"])
        for i, (row_id, tokens) in enumerate(zip(table.column("id").to_pylist(), table.column("tokens").to_pylist())):
            arrays = []
            for name in names:
                cell = table.column(name)[i].values
                if pa.types.is_fixed_size_list(cell.type):  # the earlier layout: a list of per-token vectors
                    cell = cell.flatten()
                arrays.append(float_values(cell.to_numpy(zero_copy_only=False), dtype).reshape(-1, width))
            yield row_id, tokens, arrays[0] if len(arrays) == 1 else np.stack(arrays)

