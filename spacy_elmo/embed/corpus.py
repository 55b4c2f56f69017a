"""Embed a corpus with the `elmo` pipeline on a Ray cluster, into resumable Parquet shards.

The input stays where it lies (``inputs``: a file, a directory, a glob or a URI pyarrow's
filesystems read; text one record a line, ``.gz`` too, or Parquet with a ``text`` column). The
driver only lists the files. Ray Data's read tasks (``CorpusDatasource``, a file-based datasource)
stream each file on the workers and cut it into shards of ``shard_rows`` rows: shard
``shard-FFFFF-BBBBB`` is block B of file F. A read task that finds a shard written and verified
passes on only its name; the others go to a pool of actors (``map_batches`` with a callable class),
each of which loads the pipeline once, in its own process, because spaCy objects do not survive
Ray's object store, and writes its shards itself (``shards.write_shard``). A rerun after a
crash or a killed worker therefore embeds only what is missing, and a rerun of a finished run
returns without starting Ray (``runs.finished_shards``). The output folder must be one path
every node sees (a shared filesystem).

Ray is imported only here, at run time: ``pip install spacy-elmo[ray]``.
"""
import json
import logging
import os
import signal
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple, Union

from ..io.text_input import BinaryFileError, TextDecodeError
from .inputs import CorpusFiles, CorpusReadError, file_blocks, open_input
from .runs import (
    EmbedReport, EmbedSettings, ModelSource, PathLike, check_choices, finished_shards, load_source,
    model_source, open_run, weights_sha256, write_finished,
)
from .shards import LAYOUT, input_sha256, select_columns, shard_done, shard_id, shard_key, shard_table, write_shard, written_shards
# sentences per forward pass: per CPU an actor has on a CPU cluster, and per actor on a GPU
BATCH_PER_CPU = 32
BATCH_PER_GPU = 256
# fault injection for the tests: a file holding N; an actor process that has written N shards while
# the file exists deletes it and kills itself (SIGKILL, as an out-of-memory kill would)
KILL_MARKER_ENV = "SPACY_ELMO_EMBED_KILL_MARKER"


def load_elmo(model: Union[PathLike, ModelSource]) -> Tuple[Any, Any]:
    """The pipeline and its `elmo` component for a pipeline directory, or for any biLM
    ``io.loading`` finds (a model directory, a published pair's directory or files, a published name).

    RETURNS (Tuple[Language, Elmo]): the pipeline and the component that runs.
    """
    import spacy

    from ..pipeline import Elmo, create_pipeline

    source = model_source(model)
    if source.path is not None and (Path(source.path) / "config.cfg").is_file():
        nlp = spacy.load(source.path)
    else:
        nlp = create_pipeline(load_source(source))
    found = [pipe for _, pipe in nlp.pipeline if isinstance(pipe, Elmo)]
    if len(found) != 1:
        raise ValueError(f"{source.name}: a pipeline for embed-corpus needs exactly one elmo component, it has {len(found)}")
    return nlp, found[0]


def shard_blocks(files: CorpusFiles, index: int, output: Path, *, rows: int, strict: bool, stream: Any = None) -> Iterator[Dict[str, Any]]:
    """One input file's shards as rows for the actors: name, ids, texts and input SHA-256, or, for a
    shard already written and verified, its name with ``done`` set and no texts."""
    for block, (first, ids, texts, bad) in enumerate(file_blocks(files, index, rows=rows, strict=strict, stream=stream)):
        name = shard_id(index, block)
        expected = input_sha256(ids, texts)
        done = shard_done(output, name, expected)
        yield {
            "shard": name, "done": done, "ids": [] if done else [str(i) for i in ids], "texts": [] if done else texts,
            "id_is_int": all(isinstance(i, int) for i in ids), "input_sha256": expected, "undecodable": bad,
            "file": files.names[index], "first_line": first + 1,
        }


def _datasource(files: CorpusFiles, output: Path, *, rows: int, strict: bool) -> Any:
    """A Ray Data file-based datasource over ``files``: each read task streams its files (Ray opens
    them, decompressing by suffix) and yields one row per shard."""
    import pyarrow as pa
    from ray.data.datasource import FileBasedDatasource

    class CorpusDatasource(FileBasedDatasource):
        def __init__(self) -> None:
            super().__init__(files.paths, filesystem=files.filesystem)
            self.index = {path: i for i, path in enumerate(files.paths)}

        def _open_input_source(self, filesystem: Any, path: str, **open_args: Any) -> Any:
            # Parquet needs random access, not a stream; a file that cannot be opened is named
            return open_input(files, path, files.names[self.index[path]])

        def _read_stream(self, f: Any, path: str) -> Iterator[Any]:
            for row in shard_blocks(files, self.index[path], output, rows=rows, strict=strict, stream=f):
                yield pa.Table.from_pylist([row])

    return CorpusDatasource()


class ShardEmbedder:
    """A Ray Data actor (or a Spark Python worker's): loads the pipeline once, then embeds and writes
    the shards it is given."""

    def __init__(
        self, model: Union[str, ModelSource], output: str, settings: Dict[str, Any], batch_size: int, threads: int,
        device: Optional[str] = None,
    ) -> None:
        """device (Optional[str]): where the biLM runs ("cpu", "cuda:1"); None: the GPU where this process
            sees one (a Ray actor given a GPU sees only it), else the CPU."""
        import torch

        from ..layers.bilm_model import THREADS_ATTR

        torch.set_num_threads(threads)
        model = model_source(model)
        self.nlp, self.elmo = load_elmo(model)
        # the pool was sized for this many threads an actor: the biLM's own choice for its shape
        # (spacy-elmo.BiLM.v3's threads, up to five for the largest) would run more on the same CPUs
        for node in self.elmo.model.walk():
            if node.attrs.get(THREADS_ATTR) is not None:
                node.attrs[THREADS_ATTR] = threads
        self.settings = EmbedSettings(**settings)
        if weights_sha256(self.elmo.bilm) != self.settings.weights_sha256:
            raise RuntimeError(f"{model.name}: this worker's copy of the model has other weights than the driver's")
        if device is None:  # Ray gave this actor a GPU (CUDA_VISIBLE_DEVICES names only it), or none
            device = "cuda" if torch.cuda.is_available() else "cpu"
        self.elmo.bilm.to(device)
        self.output = Path(output)
        self.batch_size = batch_size
        self.written = 0
        self.columns = select_columns(self.settings.layers, self.elmo.bilm.config.n_output_layers)
        self.metadata = {
            "spacy_elmo.layout": str(LAYOUT),
            "spacy_elmo.model": self.settings.model,
            "spacy_elmo.weights_sha256": self.settings.weights_sha256,
            "spacy_elmo.layers": self.settings.layers,
            "spacy_elmo.columns": json.dumps(self.columns),
            "spacy_elmo.dtype": self.settings.dtype,
            "spacy_elmo.max_window": str(next((node.attrs["max_window"] for node in self.elmo.model.walk()
                                                if "max_window" in node.attrs), "")),
        }

    def __call__(self, batch: Any) -> Dict[str, List[Any]]:
        """Ray Data's call: a pyarrow batch of ``shard_blocks`` rows. RETURNS: ``embed_item``'s results, as columns."""
        done = [self.embed_item(item) for item in batch.to_pylist()]
        return {key: [counts[key] for counts in done] for key in ("shard", "written", "rows", "tokens", "undecodable")}

    def embed_item(self, item: Dict[str, Any]) -> Dict[str, Any]:
        """Embed and write one shard (a ``shard_blocks`` row) unless it is done: the per-shard work,
        the same on Ray and on Spark. RETURNS (Dict[str, Any]): the shard's id, and written (0 or 1),
        rows, tokens, undecodable."""
        if item["done"]:
            return {"shard": item["shard"], "written": 0, "rows": 0, "tokens": 0, "undecodable": 0}
        ids = [int(i) for i in item["ids"]] if item["id_is_int"] else item["ids"]
        self._forget()
        table, tokens = shard_table(
            self.elmo, ids, item["texts"], columns=self.columns, dtype=self.settings.dtype, batch_size=self.batch_size,
            metadata=self.metadata, file=item["file"], first_line=item["first_line"], nlp=self.nlp,
        )
        write_shard(self.output, item["shard"], table, rows=len(ids), tokens=tokens, input_sha256=item["input_sha256"],
                    undecodable=item["undecodable"], compression=self.settings.compression, file=item["file"])
        self.written += 1
        self._kill_if_planned()
        return {"shard": item["shard"], "written": 1, "rows": len(ids), "tokens": tokens, "undecodable": item["undecodable"]}

    def _forget(self) -> None:
        """Empty the caches, so that a shard's bits depend on its rows only, not on what this worker
        embedded before (a cached vector was computed in another batch: its last bits may differ)."""
        from ..layers.bilm_model import CACHE_ATTR, clear_frozen_cache

        cache = getattr(self.elmo.bilm.runner, "char_cache", None)
        if cache is not None:
            cache.clear()
        for node in self.elmo.model.walk():
            if CACHE_ATTR in node.attrs:
                clear_frozen_cache(node)

    def _kill_if_planned(self) -> None:
        marker = os.environ.get(KILL_MARKER_ENV)
        if not marker or not Path(marker).is_file() or self.written < int(Path(marker).read_text() or 0):
            return
        Path(marker).unlink()
        os.kill(os.getpid(), signal.SIGKILL)


def print_progress(shards: int, written: int, rows: int, tokens: int, seconds: float) -> None:
    """Default progress, on stderr: shards seen, and this run's shards, rows and tokens per second.

    shards (int): shards seen so far (skipped ones included). written (int): written by this run.
    rows, tokens (int): embedded by this run. seconds (float): since the pipeline started.
    """
    per_s = (lambda n: n / seconds if seconds > 0 else 0.0)
    print(
        f"shards {shards} ({written} written)  rows {rows}  {per_s(rows):.1f} rows/s  {per_s(tokens):.0f} tokens/s",
        file=sys.stderr, flush=True,
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


def cluster_sizing(resources: Dict[str, float], *, actors: Optional[int], cpus_per_actor: int,
                   batch_size: Optional[int]) -> Tuple[int, int, int]:
    """Actors, GPUs per actor and batch size for a cluster's resources (``ray.cluster_resources()``).

    With GPUs: one actor per GPU, ``BATCH_PER_GPU`` sentences a batch. Without: as many actors of
    ``cpus_per_actor`` CPUs as the cluster's CPUs allow (none kept for the driver and Ray, whose
    share is small beside an actor's: it lists files and gathers counts), ``BATCH_PER_CPU``
    sentences per CPU of an actor. Given values are kept.
    RETURNS (Tuple[int, int, int]): actors, GPUs per actor (0 or 1), batch size.
    """
    gpus = int(resources.get("GPU", 0))
    cpus = int(resources.get("CPU", 1))
    if gpus:
        return actors or gpus, 1, batch_size or BATCH_PER_GPU
    return actors or max(1, cpus // cpus_per_actor), 0, batch_size or BATCH_PER_CPU * cpus_per_actor


def embed_corpus(
    input: PathLike,
    output: PathLike,
    model: Optional[PathLike] = None,
    *,
    options: Optional[PathLike] = None,
    weights: Optional[PathLike] = None,
    address: Optional[str] = None,
    actors: Optional[int] = None,
    cpus_per_actor: int = 1,
    layers: str = "all",
    dtype: str = "float32",
    compression: str = "zstd",
    shard_rows: int = 500,
    batch_size: Optional[int] = None,
    strict_utf8: bool = False,
    object_store_memory: Optional[int] = None,
    progress: Optional[Callable[..., None]] = print_progress,
) -> EmbedReport:
    """Embed every record of ``input`` into Parquet shards under ``output``, on Ray actors.

    input (PathLike): a file, a directory, a glob or a URI (``s3://``, ``gs://``, ``hdfs://``) of text
        files (one record a line, ``.gz`` too) or Parquet files (``text``, optional ``id``).
    output (PathLike): the shards' folder, a path every node of the cluster sees.
    model (Optional[PathLike]): a spaCy pipeline directory with one elmo component, or any biLM `dump`
        loads (model directory, published pair's directory, published name); None: the shipped ``en_small``.
    options, weights (Optional[PathLike]): a published pair, in place of ``model``.
    address (Optional[str]): None: start a local Ray for this call (and stop it after); "auto",
        "HOST:PORT" or "ray://HOST:10001": join that cluster. A Ray already initialized in this
        process is used as it is.
    actors (Optional[int]): actors in the pool; None: sized to the cluster (``cluster_sizing``).
    cpus_per_actor (int): CPUs and torch threads per actor.
    layers (str): "all" (every layer), "mix" (the component's mix), "top", "mean" (of all layers),
        a layer index or a comma-separated list of them (``shards.select_columns``).
    dtype (str): "float32", "float16" or "bfloat16", the layers as stored.
    compression (str): the Parquet codec (``shards.COMPRESSIONS``; zstd by default).
    shard_rows (int): input rows per shard, the unit of resuming.
    batch_size (Optional[int]): sentences per forward pass; None: sized to the cluster.
    strict_utf8 (bool): refuse a line that is not UTF-8 (the run stops, naming file and line)
        rather than replace its bad bytes with U+FFFD and count it.
    object_store_memory (Optional[int]): bytes of object store for a local Ray.
    progress (Optional[Callable]): called after each shard as ``print_progress``; None: silent.
    RETURNS (EmbedReport): shards skipped and written, rows, tokens and undecodable lines, seconds.
    """
    check_choices(layers=layers, dtype=dtype, compression=compression)
    if shard_rows < 1 or cpus_per_actor < 1 or (actors is not None and actors < 1) or (batch_size is not None and batch_size < 1):
        raise ValueError("shard_rows, actors, cpus_per_actor and batch_size must be >= 1")
    start = time.perf_counter()
    model = model_source(model, options=options, weights=weights)
    files, output, settings = open_run(input, output, model, layers=layers, dtype=dtype, shard_rows=shard_rows,
                                       compression=compression)
    done_before = finished_shards(output, settings, files)
    if done_before is not None:  # a finished run, its input unchanged and its shards verified: no Ray at all
        return EmbedReport(done_before, done_before, 0, 0, 0, 0, 0, 0, time.perf_counter() - start)
    ray = _import_ray()
    started_here = not ray.is_initialized()
    if started_here:
        init: Dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
        if address is None:  # "local": a new Ray, even where a `ray start` cluster runs on this machine
            init["address"] = "local"
            init["num_cpus"] = max(os.cpu_count() or 1, (actors or 1) * cpus_per_actor)
            init["object_store_memory"] = object_store_memory
        else:
            init["address"] = address
        ray.init(**init)
    seen = skipped = written = rows = tokens = undecodable = 0
    blocks: Dict[int, int] = {}  # shards seen per input file, for the record of a finished run
    console = [handler for handler in logging.getLogger("ray.data").handlers
               if isinstance(handler, logging.StreamHandler) and not isinstance(handler, logging.FileHandler)]
    for handler in console:
        handler.addFilter(_quiet_errors)
    try:
        actors, gpus, batch_size = cluster_sizing(ray.cluster_resources(), actors=actors,
                                                  cpus_per_actor=cpus_per_actor, batch_size=batch_size)
        context = ray.data.DataContext.get_current()
        context.enable_progress_bars = False
        dataset = ray.data.read_datasource(
            # read tasks claim no CPU: a pool given every CPU of the cluster still gets its input
            _datasource(files, output, rows=shard_rows, strict=strict_utf8), num_cpus=0,
        ).map_batches(
            ShardEmbedder,
            fn_constructor_kwargs={
                "model": model, "output": str(output), "settings": asdict(settings), "batch_size": batch_size,
                "threads": cpus_per_actor,
            },
            batch_size=1, batch_format="pyarrow", compute=ray.data.ActorPoolStrategy(size=actors),
            num_cpus=cpus_per_actor, num_gpus=gpus,
        )
        for done in dataset.iter_rows():
            seen += 1
            written += int(done["written"])
            rows += int(done["rows"])
            tokens += int(done["tokens"])
            undecodable += int(done["undecodable"])
            index, block = shard_key(done["shard"])
            blocks[index] = max(blocks.get(index, 0), block + 1)
            if progress is not None:
                progress(seen, written, rows, tokens, time.perf_counter() - start)
        skipped = seen - written
        if seen:
            write_finished(output, settings, files, blocks)
    except Exception as err:
        raise stopped(err, output) from None
    finally:
        for handler in console:
            handler.removeFilter(_quiet_errors)
        if started_here:
            ray.shutdown()
    if not seen:  # as every command given nothing to read: say so and fail
        raise ValueError(f"{input}: nothing to embed: the input files hold no lines")
    return EmbedReport(seen, skipped, written, rows, tokens, undecodable, actors, batch_size, time.perf_counter() - start)


def _quiet_errors(record: logging.LogRecord) -> bool:
    """Ray Data's console handlers print a failed task's traceback (some two hundred lines); the run
    says why in one line itself (``stopped``), and Ray's session log files keep the traceback."""
    return record.levelno < logging.ERROR


# what a rerun of the same command meets again until the input or the folder is changed
INPUT_ERRORS = (CorpusReadError, TextDecodeError, BinaryFileError, ValueError)


class EmbedStopped(RuntimeError):
    """A run that stopped: one line saying why, what is kept, and what to do."""


def stopped(err: BaseException, output: Path) -> EmbedStopped:
    """The one-line error of a run stopped by ``err`` (on Ray, the innermost error a task raised):
    an input that cannot be read is named, to fix or remove before the rerun; anything else (a
    killed worker, a lost node) is for a plain rerun."""
    while getattr(err, "cause", None) is not None and err.cause is not err:
        err = err.cause
    lines = str(err).strip().splitlines()
    kept = len(written_shards(output))
    message = lines[0] if lines else type(err).__name__
    if isinstance(err, INPUT_ERRORS):
        return EmbedStopped(f"embed-corpus stopped: {message}; {kept} shards written under {output} are kept: fix "
                            "or remove that input and run the same command again")
    return EmbedStopped(f"embed-corpus stopped ({type(err).__name__}: {message}); {kept} shards are written under "
                        f"{output}: run the same command again to do the rest")
