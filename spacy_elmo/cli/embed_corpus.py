"""`embed-corpus`: every line of a corpus through the `elmo` pipeline on Ray actors, into resumable Parquet shards."""
from pathlib import Path
from typing import Optional

import typer

from ..embed_corpus import DTYPES, LAYER_CHOICES, embed_corpus
from ._app import app


@app.command("embed-corpus")
def embed_corpus_cli(
    input: Path = typer.Option(..., "--input", help=".txt one sentence or document per line, or .parquet with a 'text' column"),
    output: Path = typer.Option(..., "--output", help="folder of Parquet shards (one path every Ray node sees)"),
    model: str = typer.Option(..., "--model", help="pipeline or model directory, or a published model's name"),
    address: Optional[str] = typer.Option(None, "--address", help="'auto', HOST:PORT or ray://HOST:10001; default: a local Ray"),
    actors: int = typer.Option(1, "--actors", min=1, help="actors, each loading the model once"),
    cpus_per_actor: int = typer.Option(1, "--cpus-per-actor", min=1),
    layers: str = typer.Option("all", "--layers", help="all: every biLM layer; mix: the component's mix"),
    precision: str = typer.Option("float32", "--precision", help="the layers as stored: float32 or float16"),
    shard_rows: int = typer.Option(500, "--shard-rows", min=1, help="input rows per shard (the unit of resuming)"),
    batch_size: int = typer.Option(64, "--batch-size", min=1),
) -> None:
    """Embed a corpus with Ray Data into Parquet shards; run it again to resume.

    Shards already written and verified (SHA-256 in shard-NNNNN.json) are skipped.
    """
    if layers not in LAYER_CHOICES:
        raise typer.BadParameter(f"--layers must be one of {', '.join(LAYER_CHOICES)}")
    if precision not in DTYPES:
        raise typer.BadParameter(f"--precision must be one of {', '.join(DTYPES)}")
    try:
        report = embed_corpus(
            input, output, model, address=address, actors=actors, cpus_per_actor=cpus_per_actor,
            layers=layers, dtype=precision, shard_rows=shard_rows, batch_size=batch_size,
        )
    except (ImportError, ValueError, RuntimeError, FileNotFoundError) as err:
        typer.echo(str(err), err=True)
        raise typer.Exit(1) from None
    typer.echo(
        f"{report.shards} shards under {output}: {report.skipped} already done, {report.written} written "
        f"({report.rows} rows, {report.tokens} tokens in {report.seconds:.1f} s)"
    )
