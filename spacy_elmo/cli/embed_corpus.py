"""`embed-corpus`: every record of a corpus through the `elmo` pipeline on Ray actors, into resumable Parquet shards."""
from pathlib import Path
from typing import Optional

import typer

from ..embed.corpus import embed_corpus
from ..embed.runs import check_choices
from ..embed.shards import COMPRESSIONS, DTYPES
from ._app import app
from ._vocabulary import MODEL, OPTIONS, WEIGHTS, CommandWithOldSpellings


@app.command("embed-corpus", cls=CommandWithOldSpellings)
def embed_corpus_cli(
    input: str = typer.Option(
        ..., "--input",
        help="a file, directory, glob or URI (s3://, gs://, hdfs://) of text (one record a line, .gz too) "
             "or .parquet files with a 'text' column",
    ),
    output: Path = typer.Option(..., "--output", help="folder of Parquet shards (one path every Ray node sees)"),
    model: Optional[str] = MODEL,
    options: Optional[Path] = OPTIONS,
    weights: Optional[Path] = WEIGHTS,
    address: Optional[str] = typer.Option(None, "--address", help="'auto', HOST:PORT or ray://HOST:10001; default: a local Ray"),
    actors: Optional[int] = typer.Option(None, "--actors", min=1, help="actors, each loading the model once; default: one per GPU, else as many as the CPUs allow at --cpus-per-actor each"),
    cpus_per_actor: int = typer.Option(1, "--cpus-per-actor", min=1, help="CPUs and torch threads per actor"),
    layers: str = typer.Option("all", "--layers", help="all (every biLM layer), mix (the component's mix), top, mean (of all layers), a layer index or a list (0,2)"),
    dtype: str = typer.Option("float32", "--dtype", help=f"the layers as stored: {', '.join(DTYPES)}"),
    compression: str = typer.Option("zstd", "--compression", help=f"the Parquet codec: {', '.join(COMPRESSIONS)}"),
    shard_rows: int = typer.Option(500, "--shard-rows", min=1, help="input rows per shard (the unit of resuming)"),
    batch_size: Optional[int] = typer.Option(None, "--batch-size", min=1, help="sentences per forward pass; default: 32 per actor CPU, 256 on a GPU"),
    strict_utf8: bool = typer.Option(False, "--strict-utf8", help="stop at a line that is not UTF-8 instead of replacing its bytes and counting it"),
    engine: str = typer.Option("ray", "--engine", help="ray, or spark (pip install spacy-elmo[spark]; the same shards)"),
    master: Optional[str] = typer.Option(None, "--master", help="with --engine spark: local[N], spark://HOST:7077 or yarn; default: Spark's (spark-submit's)"),
) -> None:
    """Embed a corpus with Ray Data into Parquet shards; run it again to resume.

    The workers read the input where it lies; shards already written and verified (SHA-256 in
    _embed-corpus/shard-FFFFF-BBBBB.json) are skipped. The folder reads as a Parquet dataset.
    """
    try:
        check_choices(layers=layers, dtype=dtype, compression=compression)
    except ValueError as err:
        raise typer.BadParameter(f"--{err}") from None
    if engine not in ("ray", "spark"):
        raise typer.BadParameter("--engine must be ray or spark")
    try:
        if engine == "spark":
            from ..embed.spark import embed_corpus_spark

            report = embed_corpus_spark(
                input, output, model, options=options, weights=weights, master=master, layers=layers, dtype=dtype,
                compression=compression, shard_rows=shard_rows, batch_size=batch_size, strict_utf8=strict_utf8,
            )
        else:
            report = embed_corpus(
                input, output, model, options=options, weights=weights, address=address, actors=actors, cpus_per_actor=cpus_per_actor,
                layers=layers, dtype=dtype, compression=compression, shard_rows=shard_rows, batch_size=batch_size,
                strict_utf8=strict_utf8,
            )
    except (ImportError, ValueError, RuntimeError, OSError) as err:
        typer.echo(str(err), err=True)
        raise typer.Exit(1) from None
    if report.actors == 0:  # every shard found done and verified; no cluster was started
        typer.echo(f"{report.shards} shards under {output}: all already done and verified, nothing to run")
        return
    typer.echo(
        f"{report.shards} shards under {output}: {report.skipped} already done, {report.written} written "
        f"({report.rows} rows, {report.tokens} tokens in {report.seconds:.1f} s; "
        f"{report.actors} {'actors' if engine == 'ray' else 'Spark tasks at once'}, batches of {report.batch_size})"
    )
    if report.undecodable:
        typer.echo(
            f"{report.undecodable} lines held bytes that are not UTF-8, replaced by U+FFFD "
            "(counted per shard in _embed-corpus/shard-*.json; --strict-utf8 stops at the first)", err=True,
        )

