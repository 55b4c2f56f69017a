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
component). Ray is imported only here, at run time: ``pip install spacy-elmo[ray]``. The shard
files themselves (input rows, one shard's table, writing and verifying it, reading the folder back)
are ``embed_shards.py``.
"""
import hashlib
import json
import os
import signal
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Dict, Optional, Tuple, Union

import numpy as np

from .atomic import write_atomic
from .embed_shards import DTYPES, input_sha256, read_corpus, shard_done, shard_table, write_shard

PathLike = Union[str, Path]
LAYER_CHOICES = ("all", "mix")
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
        shards, rows, tokens, seconds = [], [], [], []
        for shard, ids, texts, expected_input in zip(batch["shard"], batch["ids"], batch["texts"], batch["input_sha256"]):
            start = time.perf_counter()
            ids, texts = list(ids), [str(text) for text in texts]
            table, n_tokens = shard_table(
                self.elmo, ids, texts, layers=self.settings.layers, dtype=self.settings.dtype,
                batch_size=self.batch_size, metadata=self.metadata,
            )
            write_shard(self.output, int(shard), table, rows=len(texts), tokens=n_tokens, input_sha256=str(expected_input))
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
