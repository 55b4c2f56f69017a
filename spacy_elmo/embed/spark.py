"""Embed a corpus with the `elmo` pipeline on Spark, into the same shards ``embed_corpus`` writes on Ray.

The same parts run: the driver lists the input (``inputs.resolve_inputs``) and checks or
writes the folder's settings; each Spark task reads one input file where it lies and cuts it into
shards (``corpus.shard_blocks``, which skips those written and verified); each Python worker
loads the pipeline once (``ShardEmbedder``, kept for the worker's life, as Spark reuses its Python
workers) and writes each shard itself (``ShardEmbedder.embed_item``). With the same settings the
shard files are the same bytes as Ray's; a rerun resumes shard by shard as on Ray, and a rerun of
a finished run returns without starting a session (``runs.finished_shards``). PySpark is
imported only here, at run time: ``pip install spacy-elmo[spark]``.
"""
import os
import sys
import time
from dataclasses import asdict
from functools import partial
from pathlib import Path
from typing import Any, Dict, Iterator, Mapping, Optional

from .corpus import BATCH_PER_CPU, BATCH_PER_GPU, ShardEmbedder, shard_blocks, stopped
from .inputs import CorpusFiles
from .runs import EmbedReport, ModelSource, PathLike, check_choices, finished_shards, model_source, open_run, write_finished

_EMBEDDERS: Dict[tuple, ShardEmbedder] = {}


def _import_spark() -> Any:
    try:
        from pyspark.sql import SparkSession
    except ImportError as err:
        raise ImportError(
            f"embed-corpus on Spark needs PySpark, which is not installed ({err}); install it with: "
            "pip install spacy-elmo[spark]"
        ) from None
    return SparkSession


def _embed_file(
    index: int, *, files: CorpusFiles, output: str, model: ModelSource, settings: Dict[str, Any], batch_size: int, strict: bool
) -> Iterator[Dict[str, int]]:
    """One Spark task: read input file ``index`` where it lies, and embed the shards not yet done.
    RETURNS (Iterator[Dict[str, int]]): one summary of the file: index, shards, written, rows, tokens,
        undecodable (so that the driver collects one row per file, not per shard)."""
    from pyspark import TaskContext

    device = task_device(TaskContext.get().resources())
    key = (model, output, tuple(sorted(settings.items())), batch_size, device)
    if key not in _EMBEDDERS:  # once per Python worker (and GPU)
        _EMBEDDERS[key] = ShardEmbedder(model, output, settings, batch_size, threads=1, device=device)
    embedder = _EMBEDDERS[key]
    summary = {"index": index, "shards": 0, "written": 0, "rows": 0, "tokens": 0, "undecodable": 0}
    for item in shard_blocks(files, index, Path(output), rows=settings["shard_rows"], strict=strict):
        done = embedder.embed_item(item)
        summary["shards"] += 1
        for name in ("written", "rows", "tokens", "undecodable"):
            summary[name] += done[name]
    yield summary


def task_device(resources: Mapping[str, Any]) -> str:
    """Where a Spark task runs the biLM: the GPU Spark's scheduler assigned it (``resources()["gpu"]``,
    set by ``spark.task.resource.gpu.amount``), else the CPU; never a GPU Spark did not hand out."""
    gpu = resources.get("gpu")
    addresses = list(getattr(gpu, "addresses", None) or [])
    return f"cuda:{addresses[0]}" if addresses else "cpu"


def embed_corpus_spark(
    input: PathLike,
    output: PathLike,
    model: Optional[PathLike] = None,
    *,
    options: Optional[PathLike] = None,
    weights: Optional[PathLike] = None,
    spark: Optional[Any] = None,
    master: Optional[str] = None,
    layers: str = "all",
    dtype: str = "float32",
    compression: str = "zstd",
    shard_rows: int = 500,
    batch_size: Optional[int] = None,
    strict_utf8: bool = False,
) -> EmbedReport:
    """Embed every record of ``input`` into Parquet shards under ``output``, on Spark.

    input, output, model, options, weights, layers, dtype, compression, shard_rows, strict_utf8: as ``embed_corpus``.
    spark (Optional[SparkSession]): the session to use; None: the active one, or a new one on
        ``master`` (none where every shard is found done).
    master (Optional[str]): for a new session: "local[2]", "spark://HOST:7077", "yarn"; None: Spark's default.
        A new local session runs its Python workers on this Python unless ``PYSPARK_PYTHON`` says otherwise
        (Spark's own default, ``python3`` on the PATH, may not have spacy-elmo).
    batch_size (Optional[int]): sentences per forward pass; None: ``BATCH_PER_GPU`` where the session
        gives each task a GPU (``spark.task.resource.gpu.amount``; each task runs on the one it is
        assigned), else ``BATCH_PER_CPU`` (one torch thread per Python worker).
    RETURNS (EmbedReport): as ``embed_corpus`` (``actors``: Spark's default parallelism).
    """
    check_choices(layers=layers, dtype=dtype, compression=compression)
    if shard_rows < 1 or (batch_size is not None and batch_size < 1):
        raise ValueError("shard_rows and batch_size must be >= 1")
    start = time.perf_counter()
    model = model_source(model, options=options, weights=weights)
    files, output, settings = open_run(input, output, model, layers=layers, dtype=dtype, shard_rows=shard_rows,
                                       compression=compression)
    done_before = finished_shards(output, settings, files)
    if done_before is not None:  # a finished run, its input unchanged and its shards verified: no Spark at all
        return EmbedReport(done_before, done_before, 0, 0, 0, 0, 0, 0, time.perf_counter() - start)
    session_class = _import_spark()
    if spark is None:
        if (master or "local").startswith("local") and not os.environ.get("PYSPARK_PYTHON"):
            os.environ["PYSPARK_PYTHON"] = sys.executable
        builder = session_class.builder.appName("spacy-elmo embed-corpus")
        spark = (builder.master(master) if master else builder).getOrCreate()
    context = spark.sparkContext
    gpus = context.getConf().get("spark.task.resource.gpu.amount")
    batch_size = batch_size or (BATCH_PER_GPU if gpus else BATCH_PER_CPU)
    task = partial(
        _embed_file, files=files, output=str(output), settings=asdict(settings), batch_size=batch_size,
        model=model, strict=strict_utf8,
    )
    # one partition per input file: only file indices leave the driver
    try:
        done = context.parallelize(range(len(files.paths)), len(files.paths)).flatMap(task).collect()
    except Exception as err:  # Py4JJavaError: the task's Python error is in its message
        raise stopped(_python_error(err), output) from None
    shards, written = sum(d["shards"] for d in done), sum(d["written"] for d in done)
    if not shards:
        raise ValueError(f"{input}: nothing to embed: the input files hold no lines")
    write_finished(output, settings, files, {d["index"]: d["shards"] for d in done})
    return EmbedReport(
        shards=shards, skipped=shards - written, written=written, rows=sum(d["rows"] for d in done),
        tokens=sum(d["tokens"] for d in done), undecodable=sum(d["undecodable"] for d in done),
        actors=context.defaultParallelism, batch_size=batch_size, seconds=time.perf_counter() - start,
    )


def _python_error(err: BaseException) -> BaseException:
    """The Python error a Spark task raised, rebuilt from the Java error's text where one of ours is
    named there (an input that cannot be read), else ``err`` itself."""
    from .corpus import INPUT_ERRORS

    text = str(err)
    for kind in INPUT_ERRORS:
        marker = f"{kind.__module__}.{kind.__name__}: " if kind.__module__ != "builtins" else f"{kind.__name__}: "
        if marker in text:
            return kind(text.split(marker, 1)[1].strip().splitlines()[0])
    return err
