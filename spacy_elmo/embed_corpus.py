"""Embed a corpus with the `elmo` pipeline on a Ray cluster, into resumable Parquet shards.

The input (text, one whitespace-tokenized sentence or document per line, as `dump` reads it; or
Parquet with a ``text`` column and an optional ``id`` column) is cut into shards of
``shard_rows`` rows. Ray Data hands each shard still to do to a pool of actors (``map_batches``
with a callable class); each actor loads the pipeline once, in its own process, because spaCy
objects do not survive Ray's object store, and writes its shards itself:
``shard-NNNNN.parquet`` under a temporary name and renamed, then ``shard-NNNNN.json`` with the
file's SHA-256. A shard whose JSON is there and whose file still has that SHA-256 is done; a rerun
after a crash or a killed worker runs only the others. The output folder must therefore be one
path every node sees (a shared filesystem).

Each Parquet row holds ``id``, ``tokens``, ``token_start`` and ``token_end`` (character offsets in
the line), and either ``layer_0`` ... ``layer_L`` (every biLM layer) or ``mix`` (the component's
own mix), each a list of per-token float16 or float32 vectors. The file's metadata names the model
and the SHA-256 of its weights as safetensors (``model.safetensors`` of a pipeline's elmo
component). Ray is imported only here, at run time: ``pip install spacy-elmo[ray]``.
"""
import hashlib
import io
import json
import os
import signal
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np

from .atomic import write_atomic

PathLike = Union[str, Path]
LAYER_CHOICES = ("all", "mix")
DTYPES = {"float32": np.float32, "float16": np.float16}
SETTINGS_NAME = "embed-corpus.json"
FORMAT = "spacy-elmo.embed-corpus"
# fault injection for the tests: a file holding N; an actor process that has written N shards while
# the file exists deletes it and kills itself (SIGKILL, as an out-of-memory kill would)
KILL_MARKER_ENV = "SPACY_ELMO_EMBED_KILL_MARKER"


@dataclass(frozen=True)
class EmbedSettings:
    """What a run's shards depend on; a rerun into the same folder must have the same.

    model (str): the model's name (a published name, or the directory's name).
    weights_sha256 (str): SHA-256 of the weights as safetensors.
    layers (str): "all" or "mix".
    dtype (str): "float32" or "float16".
    shard_rows (int): input rows per shard.
    rows (int): input rows in all.
    """

    model: str
    weights_sha256: str
    layers: str
    dtype: str
    shard_rows: int
    rows: int


@dataclass(frozen=True)
class EmbedReport:
    """What ``embed_corpus`` did.

    shards (int): shards of the corpus. skipped (int): those found written and verified.
    written (int): those written by this run. rows, tokens (int): embedded by this run.
    seconds (float): this run's wall time.
    """

    shards: int
    skipped: int
    written: int
    rows: int
    tokens: int
    seconds: float


def read_corpus(path: PathLike) -> Tuple[List[Any], List[str]]:
    """The ids and lines of a corpus.

    path (PathLike): a ``.parquet`` file (column ``text``, optional ``id``) or a text file, one
        sentence or document per line (ids: line numbers from 0, as `dump` numbers them).
    RETURNS (Tuple[List[Any], List[str]]): ids and texts.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: input file not found")
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        names = pq.read_schema(path).names
        if "text" not in names:
            raise ValueError(f"{path}: a Parquet input needs a 'text' column (it has {names})")
        table = pq.read_table(path, columns=[c for c in ("id", "text") if c in names])
        texts = table.column("text").to_pylist()
        ids = table.column("id").to_pylist() if "id" in names else list(range(len(texts)))
        return ids, texts
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    return list(range(len(lines))), lines


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


def weights_sha256(bilm: Any) -> str:
    """SHA-256 of a biLM's weights as safetensors: the ``weights_sha256`` our model directories record."""
    from .io.native import bilm_to_bytes

    return hashlib.sha256(bilm_to_bytes(bilm)).hexdigest()


def model_name(model: PathLike) -> str:
    """The name a run records for ``model``: a directory's name, or the published name as given."""
    return Path(model).name if Path(model).exists() else str(model)


def load_elmo(model: PathLike) -> Tuple[Any, Any]:
    """The pipeline and its `elmo` component for a pipeline directory, or for any biLM
    ``io.loading`` finds (a model directory, a published pair's directory, a published name).

    RETURNS (Tuple[Language, Elmo]): the pipeline and the component that runs.
    """
    import spacy

    from .io.loading import resolve_bilm
    from .pipeline import Elmo, create_pipeline

    if (Path(model) / "config.cfg").is_file():
        nlp = spacy.load(model)
    else:
        nlp = create_pipeline(resolve_bilm(model))
    found = [pipe for _, pipe in nlp.pipeline if isinstance(pipe, Elmo)]
    if len(found) != 1:
        raise ValueError(f"{model}: a pipeline for embed-corpus needs exactly one elmo component, it has {len(found)}")
    return nlp, found[0]


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


def shard_name(shard: int) -> str:
    return f"shard-{shard:05d}"


def input_sha256(ids: Sequence[Any], texts: Sequence[str]) -> str:
    """SHA-256 of a shard's input rows: a rerun on a changed corpus is refused, not mixed in."""
    return hashlib.sha256(json.dumps([list(ids), list(texts)], default=str).encode("utf-8", "replace")).hexdigest()


def shard_done(output: Path, shard: int, expected_input: str) -> bool:
    """Whether a shard is written and verified: its JSON is there, names this input, and the
    Parquet file still has the SHA-256 it records."""
    record_path = output / f"{shard_name(shard)}.json"
    data_path = output / f"{shard_name(shard)}.parquet"
    if not (record_path.is_file() and data_path.is_file()):
        return False
    try:
        record = json.loads(record_path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return False
    if record.get("input_sha256") != expected_input:
        raise ValueError(
            f"{record_path}: written from other input rows than shard {shard} of this corpus; "
            "give a new --output folder, or delete this one, to embed a changed corpus"
        )
    return hashlib.sha256(data_path.read_bytes()).hexdigest() == record.get("sha256")


class ShardEmbedder:
    """A Ray Data actor: loads the pipeline once, then embeds and writes the shards it is given."""

    def __init__(self, model: str, output: str, settings: Dict[str, Any], batch_size: int, threads: int) -> None:
        import torch

        torch.set_num_threads(threads)
        self.nlp, self.elmo = load_elmo(model)
        self.settings = EmbedSettings(**settings)
        if weights_sha256(self.elmo.bilm) != self.settings.weights_sha256:
            raise RuntimeError(f"{model}: this worker's copy of the model has other weights than the driver's")
        self.output = Path(output)
        self.batch_size = batch_size
        self.written = 0
        self.metadata = {
            "spacy_elmo.model": self.settings.model,
            "spacy_elmo.weights_sha256": self.settings.weights_sha256,
            "spacy_elmo.layers": self.settings.layers,
            "spacy_elmo.dtype": self.settings.dtype,
        }

    def __call__(self, batch: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
        import pyarrow.parquet as pq

        shards, rows, tokens, seconds = [], [], [], []
        for shard, ids, texts, expected_input in zip(batch["shard"], batch["ids"], batch["texts"], batch["input_sha256"]):
            start = time.perf_counter()
            ids, texts = list(ids), [str(text) for text in texts]
            table, n_tokens = shard_table(
                self.elmo, ids, texts, layers=self.settings.layers, dtype=self.settings.dtype,
                batch_size=self.batch_size, metadata=self.metadata,
            )
            buffer = io.BytesIO()
            pq.write_table(table, buffer)
            data = buffer.getvalue()
            name = shard_name(int(shard))
            write_atomic(self.output / f"{name}.parquet", data)
            record = {
                "shard": int(shard), "rows": len(texts), "tokens": n_tokens, "input_sha256": str(expected_input),
                "sha256": hashlib.sha256(data).hexdigest(),
            }
            write_atomic(self.output / f"{name}.json", json.dumps(record, indent=1).encode("utf-8"))
            self.written += 1
            self._kill_if_planned()
            shards.append(int(shard))
            rows.append(len(texts))
            tokens.append(n_tokens)
            seconds.append(time.perf_counter() - start)
        return {"shard": np.array(shards), "rows": np.array(rows), "tokens": np.array(tokens), "seconds": np.array(seconds)}

    def _kill_if_planned(self) -> None:
        marker = os.environ.get(KILL_MARKER_ENV)
        if not marker or not Path(marker).is_file() or self.written < int(Path(marker).read_text() or 0):
            return
        Path(marker).unlink()
        os.kill(os.getpid(), signal.SIGKILL)


def print_progress(rows: int, todo: int, tokens: int, seconds: float, shards: Tuple[int, int]) -> None:
    """Default progress, on stderr: shards done, and this run's rows and tokens per second and time left.

    rows (int): rows this run has embedded, of ``todo``. seconds (float): since its actors were asked.
    shards (Tuple[int, int]): shards done (skipped included) and in all.
    """
    rows_per_s = rows / seconds if seconds > 0 else 0.0
    eta = (todo - rows) / rows_per_s if rows_per_s > 0 else float("nan")
    print(
        f"shards {shards[0]}/{shards[1]}  rows {rows}/{todo}  {rows_per_s:.1f} rows/s  "
        f"{tokens / seconds if seconds > 0 else 0.0:.0f} tokens/s  ETA {eta:.0f} s",
        file=sys.stderr,
        flush=True,
    )


def _import_ray() -> Any:
    try:
        import ray
        import ray.data  # noqa: F401
    except ImportError as err:
        raise ImportError(
            f"embed-corpus runs on Ray Data, which is not installed ({err}); install it with: "
            "pip install spacy-elmo[ray]"
        ) from None
    return ray


def embed_corpus(
    input: PathLike,
    output: PathLike,
    model: PathLike,
    *,
    address: Optional[str] = None,
    actors: int = 1,
    cpus_per_actor: int = 1,
    layers: str = "all",
    dtype: str = "float32",
    shard_rows: int = 500,
    batch_size: int = 64,
    max_restarts: int = -1,
    object_store_memory: Optional[int] = None,
    progress: Optional[Callable[..., None]] = print_progress,
) -> EmbedReport:
    """Embed every line of ``input`` into Parquet shards under ``output``, on Ray actors.

    input (PathLike): text (one sentence or document per line) or Parquet (``text``, optional ``id``).
    output (PathLike): the shards' folder, a path every node of the cluster sees.
    model (PathLike): a spaCy pipeline directory with one elmo component, or any biLM `dump` loads
        (model directory, published pair's directory, published name).
    address (Optional[str]): None: start a local Ray for this call (and stop it after); "auto",
        "HOST:PORT" or "ray://HOST:10001": join that cluster. A Ray already initialized in this
        process is used as it is.
    actors (int): actors in the pool, each with ``cpus_per_actor`` CPUs and torch threads.
    layers (str): "all" (every layer) or "mix" (the component's mix).
    dtype (str): "float32" or "float16", the layers as stored.
    shard_rows (int): input rows per shard, the unit of resuming.
    max_restarts (int): how often Ray restarts a dead actor and retries its shard (-1: always);
        0 lets a killed worker fail the run, which a rerun resumes.
    object_store_memory (Optional[int]): bytes of object store for a local Ray.
    progress (Optional[Callable]): called after each shard as ``print_progress``; None: silent.
    RETURNS (EmbedReport): shards skipped and written, rows and tokens embedded, seconds.
    """
    if layers not in LAYER_CHOICES:
        raise ValueError(f"layers must be one of {LAYER_CHOICES}, not {layers!r}")
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {tuple(DTYPES)}, not {dtype!r}")
    if shard_rows < 1 or actors < 1 or cpus_per_actor < 1:
        raise ValueError("shard_rows, actors and cpus_per_actor must be >= 1")
    ray = _import_ray()
    start = time.perf_counter()
    output = Path(output).resolve()
    output.mkdir(parents=True, exist_ok=True)
    ids, texts = read_corpus(input)
    settings = _settings(output, model, layers=layers, dtype=dtype, shard_rows=shard_rows, rows=len(texts))
    shards = [
        (k, ids[first:first + shard_rows], texts[first:first + shard_rows])
        for k, first in enumerate(range(0, len(texts), shard_rows))
    ]
    todo = []
    for shard, shard_ids, shard_texts in shards:
        expected = input_sha256(shard_ids, shard_texts)
        if not shard_done(output, shard, expected):
            todo.append({"shard": shard, "ids": shard_ids, "texts": shard_texts, "input_sha256": expected})
    skipped = len(shards) - len(todo)
    rows_todo = sum(len(item["texts"]) for item in todo)
    if not todo:
        return EmbedReport(len(shards), skipped, 0, 0, 0, time.perf_counter() - start)
    started_here = not ray.is_initialized()
    if started_here:
        init: Dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
        if address is None:
            init["num_cpus"] = max(os.cpu_count() or 1, actors * cpus_per_actor)
            init["object_store_memory"] = object_store_memory
        else:
            init["address"] = address
        ray.init(**init)
    written = rows = tokens = 0
    try:
        context = ray.data.DataContext.get_current()
        context.enable_progress_bars = False
        dataset = ray.data.from_items(todo, override_num_blocks=len(todo)).map_batches(
            ShardEmbedder,
            fn_constructor_kwargs={
                "model": str(Path(model).resolve()) if Path(model).exists() else str(model),
                "output": str(output),
                "settings": asdict(settings),
                "batch_size": batch_size,
                "threads": cpus_per_actor,
            },
            batch_size=1,
            compute=ray.data.ActorPoolStrategy(size=actors),
            num_cpus=cpus_per_actor,
            # Ray's default is -1; given only when changed (Ray 2.60 warns of ray_remote_args)
            **({} if max_restarts == -1 else {"max_restarts": max_restarts}),
        )
        run_start = time.perf_counter()
        for done in dataset.iter_rows():
            written += 1
            rows += int(done["rows"])
            tokens += int(done["tokens"])
            if progress is not None:
                progress(rows, rows_todo, tokens, time.perf_counter() - run_start, (skipped + written, len(shards)))
    except Exception as err:
        finished = sum(shard_done(output, item["shard"], item["input_sha256"]) for item in todo)
        raise RuntimeError(
            f"embed-corpus stopped ({type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}); "
            f"{skipped + finished} of {len(shards)} shards are written and verified under {output}: "
            "run the same command again to do the rest"
        ) from err
    finally:
        if started_here:
            ray.shutdown()
    return EmbedReport(len(shards), skipped, written, rows, tokens, time.perf_counter() - start)


def _settings(output: Path, model: PathLike, **given: Any) -> EmbedSettings:
    """This run's settings, written to the output folder, or checked against those already there."""
    from .io.loading import resolve_bilm

    settings = EmbedSettings(model=model_name(model), weights_sha256=weights_sha256(resolve_bilm(model)), **given)
    path = output / SETTINGS_NAME
    record = {"format": FORMAT, **asdict(settings)}
    if path.is_file():
        found = json.loads(path.read_text(encoding="utf-8"))
        differ = sorted(key for key in record if found.get(key) != record[key])
        if differ:
            raise ValueError(
                f"{path}: shards there were made with other settings ({', '.join(differ)}); "
                "give a new --output folder, or delete this one"
            )
    else:
        write_atomic(path, json.dumps(record, indent=2).encode("utf-8"))
    return settings


def read_shards(output: PathLike) -> Iterator[Tuple[Any, List[str], np.ndarray]]:
    """Each row of a finished output folder, in input order: id, tokens and layers
    ((L+1, n_tokens, width) with ``layers="all"``, (n_tokens, width) with "mix")."""
    import pyarrow.parquet as pq

    for path in sorted(Path(output).glob("shard-*.parquet")):
        table = pq.read_table(path)
        names = [name for name in table.column_names if name.startswith("layer_") or name == "mix"]
        width = table.schema.field(names[0]).type.value_type.list_size
        for i, (row_id, tokens) in enumerate(zip(table.column("id").to_pylist(), table.column("tokens").to_pylist())):
            arrays = [table.column(name)[i].values.flatten().to_numpy().reshape(len(tokens), width) for name in names]
            yield row_id, tokens, arrays[0] if names == ["mix"] else np.stack(arrays)
