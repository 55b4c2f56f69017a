"""The run behind an embedded corpus's folder, for every engine (Ray and Spark): its settings,
written or checked before any shard, the report it ends with, and the record of a finished run
that lets a rerun with nothing left to do return without starting a cluster.

The bookkeeping lies in the folder's ``_embed-corpus`` subfolder, which Parquet readers skip.
``settings.json`` holds the settings the shards depend on and the input files' names and sizes; a
rerun into the same folder must have the same settings, and its input may differ from the listing
only where no shard was made from what changed: a file that was removed (or renamed away) before
any of its shards was written leaves the others in place (their shards are renumbered to the new
listing), so a run stopped by a file it could not read continues once that file is fixed or gone.
``finished.json`` is written when a run has seen every shard of every input file: those settings,
each file's name, size and modification time, and each file's number of shards. A rerun whose input
files still have those sizes and times, and whose shards all still have the SHA-256 their JSON
records, is done without reading the input (``finished_shards``); any difference sends it through
the engine, where each shard is checked against its input rows. A folder of the earlier layout
(bookkeeping beside the shards, layers as lists of vectors) is refused with what to do.
"""
import hashlib
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Dict, List, NamedTuple, Optional, Tuple, Union

from ..files import write_atomic
from .inputs import CorpusFiles, resolve_inputs
from ..io.embedded_corpus import FINISHED_FILE, RECORDS, SETTINGS_FILE
from .shards import (
    COMPRESSIONS, DTYPES, LAYOUT, check_layers, record_path, select_columns, shard_id, shard_key, shard_name,
    shard_verified, written_shards,
)

PathLike = Union[str, Path]
SETTINGS_NAME = f"{RECORDS}/{SETTINGS_FILE}"
DEFAULT_MODEL = "en_small"
FINISHED_NAME = f"{RECORDS}/{FINISHED_FILE}"
FORMAT = "spacy-elmo.embed-corpus"
# the earlier layout's settings, beside the shards
EARLIER_SETTINGS = "embed-corpus.json"
# what may differ from the folder's settings where no shard was made from the difference
INPUT_KEYS = ("files", "files_sha256", "inputs")


@dataclass(frozen=True)
class EmbedSettings:
    """What a run's shards depend on; a rerun into the same folder must have the same.

    model (str): the model's name (a published name, or the directory's name).
    weights_sha256 (str): SHA-256 of the weights as safetensors.
    layers (str): as given: all, mix, top, mean, an index or a list (``shards.select_columns``).
    dtype (str): "float32", "float16" or "bfloat16".
    shard_rows (int): input rows per shard.
    files (int): input files. files_sha256 (str): SHA-256 of their names and sizes.
    compression (str): the Parquet codec.
    """

    model: str
    weights_sha256: str
    layers: str
    dtype: str
    shard_rows: int
    files: int
    files_sha256: str
    compression: str = "zstd"


@dataclass(frozen=True)
class EmbedReport:
    """What a run did (``embed_corpus``, ``embed_corpus_spark``).

    shards (int): shards of the corpus. skipped (int): those found written and verified.
    written (int): those written by this run. rows, tokens (int): embedded by this run.
    undecodable (int): lines of those rows whose bytes were not all UTF-8 (replaced by U+FFFD).
    actors (int), batch_size (int): the pool and batch this run used; 0 and 0 where every shard was
        found done and verified before any cluster started. seconds (float): its wall time.
    """

    shards: int
    skipped: int
    written: int
    rows: int
    tokens: int
    undecodable: int
    actors: int
    batch_size: int
    seconds: float


def weights_sha256(bilm: Any) -> str:
    """SHA-256 of a biLM's weights as safetensors: the ``weights_sha256`` our model directories record."""
    from ..io.native import bilm_to_bytes

    return hashlib.sha256(bilm_to_bytes(bilm)).hexdigest()


class ModelSource(NamedTuple):
    """The biLM a run embeds with, as every worker finds it: ``path`` (a pipeline or model directory,
    a published name), or in its place the published pair ``options`` + ``weights``; files as
    absolute paths."""

    path: Optional[str]
    options: Optional[str] = None
    weights: Optional[str] = None

    @property
    def name(self) -> str:
        """The name a run records: a directory's or the weights file's name, or the published name as given."""
        given = self.weights if self.weights is not None else str(self.path)
        return Path(given).name if Path(given).exists() else given


def model_source(model: Union[None, PathLike, ModelSource], *, options: Optional[PathLike] = None,
                 weights: Optional[PathLike] = None) -> ModelSource:
    """``model`` (or the pair ``options`` + ``weights`` in its place) as a ``ModelSource``.

    RETURNS (ModelSource): raises ValueError where a pair is half given or given with a model.
    """
    if isinstance(model, ModelSource):
        return model
    if options is None and weights is None:
        return ModelSource(_where(model if model is not None else DEFAULT_MODEL))
    if options is None or weights is None or model is not None:
        raise ValueError("give a model, or options and weights (a published pair) together, not both")
    return ModelSource(None, _where(options), _where(weights))


def _where(path: PathLike) -> str:
    return str(Path(path).resolve()) if Path(path).exists() else str(path)


def load_source(source: ModelSource) -> Any:
    """RETURNS (BiLM): the biLM ``source`` names, loaded as ``io.loading.resolve_bilm`` loads it."""
    from ..io.loading import resolve_bilm

    return resolve_bilm(source.path, options=source.options, weights=source.weights)


def check_choices(*, layers: str, dtype: str, compression: str = "zstd") -> None:
    """Refuse a layer selection, a dtype or a codec that no engine writes."""
    check_layers(layers)
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, not {dtype!r}")
    if compression not in COMPRESSIONS:
        raise ValueError(f"compression must be one of {', '.join(COMPRESSIONS)}, not {compression!r}")


def open_run(
    input: PathLike, output: PathLike, model: Union[PathLike, ModelSource], *, layers: str, dtype: str, shard_rows: int,
    compression: str = "zstd",
) -> Tuple[CorpusFiles, Path, EmbedSettings]:
    """What every engine does first: list the input, make the output folder, and write this run's
    settings there, or check them against those already there (and renumber the shards where files
    without shards left the input: ``_follow_inputs``).

    RETURNS (Tuple[CorpusFiles, Path, EmbedSettings]): the input files, the output folder, the settings.
    """
    model = model_source(model)
    files = resolve_inputs(str(input))
    if not any(files.sizes):
        raise ValueError(f"{input}: nothing to embed: {'the file is' if len(files.sizes) == 1 else 'every input file is'} empty")
    output = Path(output).resolve()
    if (output / EARLIER_SETTINGS).is_file():
        raise ValueError(
            f"{output}: a folder of an earlier embed-corpus (its records beside the shards, which pandas and pyarrow "
            f"cannot read as a dataset); embed into a new --output (spacy_elmo.embed.read_shards still reads this one)"
        )
    bilm = load_source(model)
    select_columns(layers, bilm.config.n_output_layers)  # an index the model does not have is refused here
    settings = EmbedSettings(
        model=model.name, weights_sha256=weights_sha256(bilm), layers=layers, dtype=dtype,
        shard_rows=shard_rows, files=len(files.paths), files_sha256=files.sha256, compression=compression,
    )
    (output / RECORDS).mkdir(parents=True, exist_ok=True)
    path = output / SETTINGS_NAME
    record = {"format": FORMAT, "layout": LAYOUT, **asdict(settings), "inputs": [list(f) for f in zip(files.names, files.sizes)]}
    if path.is_file():
        found = json.loads(path.read_text(encoding="utf-8"))
        differ = sorted(key for key in record if key not in INPUT_KEYS and found.get(key) != record[key])
        if differ:
            raise ValueError(
                f"{path}: shards there were made with other settings ({', '.join(differ)}); "
                "give a new --output folder, or delete this one"
            )
        if found.get("inputs") != record["inputs"]:
            _follow_inputs(output, [tuple(f) for f in found.get("inputs") or []], files)
    write_atomic(path, json.dumps(record, indent=2).encode("utf-8"))
    return files, output, settings


def _follow_inputs(output: Path, before: List[Tuple[str, int]], files: CorpusFiles) -> None:
    """Renumber the written shards from the input listing ``before`` to ``files``'s, where each of
    them was made from a file still in the input (found by name; a changed one is checked row by row
    by the engine). Raises ValueError naming a file that left the input after shards were made from it."""
    index_now = {name: i for i, name in enumerate(files.names)}
    moves: Dict[str, str] = {}
    for shard in written_shards(output):
        index, block = shard_key(shard)
        name = before[index][0] if index < len(before) else None
        if name not in index_now:
            stem = shard_name(shard).rsplit("-", 1)[0]
            raise ValueError(
                f"{output}: shards were made from {name or f'input file {index}'}, which is no longer in the input; "
                f"delete {stem}-*.parquet and {RECORDS}/{stem}-*.json there to go on without it, or give a new --output"
            )
        if index_now[name] != index:
            moves[shard] = shard_id(index_now[name], block)
    # in two steps, so that a shard never takes the name of one not yet moved
    for step in ("to", "from"):
        for old, new in moves.items():
            staged = output / f".moving-{new}.parquet"
            staged_record = output / RECORDS / f".moving-{new}.json"
            if step == "to":
                os.replace(output / f"{shard_name(old)}.parquet", staged)
                os.replace(record_path(output, old), staged_record)
                continue
            record = json.loads(staged_record.read_text(encoding="utf-8"))
            write_atomic(record_path(output, new), json.dumps({**record, "shard": new}, indent=1).encode("utf-8"))
            staged_record.unlink()
            os.replace(staged, output / f"{shard_name(new)}.parquet")


def _finished_record(settings: EmbedSettings, files: CorpusFiles) -> Optional[Dict[str, Any]]:
    """What a finished run records of its settings and input, without the shard counts; None where
    the filesystem gives no modification times (a changed file could then pass unnoticed)."""
    if any(mtime is None for mtime in files.mtimes):
        return None
    return {
        "format": FORMAT, "settings": asdict(settings),
        "files": [[name, size, mtime] for name, size, mtime in zip(files.names, files.sizes, files.mtimes)],
    }


def write_finished(output: Path, settings: EmbedSettings, files: CorpusFiles, blocks: Dict[int, int]) -> None:
    """Record a run that has seen every shard: ``blocks`` maps a file's index to its number of
    shards (a file without rows has none)."""
    record = _finished_record(settings, files)
    if record is None:
        return
    record["shards"] = [blocks.get(index, 0) for index in range(len(files.paths))]
    write_atomic(output / FINISHED_NAME, json.dumps(record).encode("utf-8"))


def finished_shards(output: Path, settings: EmbedSettings, files: CorpusFiles) -> Optional[int]:
    """The number of shards where a finished run of these settings recorded these input files
    (names, sizes, modification times) and every one of its shards is still there with the
    SHA-256 its JSON records; None where anything differs or is missing (the engine then runs,
    checking each shard against its input rows)."""
    path = output / FINISHED_NAME
    expected = _finished_record(settings, files)
    if expected is None or not path.is_file():
        return None
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    counts = found.get("shards")
    if {key: found.get(key) for key in expected} != expected or not isinstance(counts, list) or len(counts) != len(files.paths):
        return None
    for index, count in enumerate(counts):
        if not all(shard_verified(output, shard_id(index, block)) for block in range(count)):
            return None
    return sum(counts)
