"""`download`: a published ELMo biLM by name (or any published pair by URL), verified, into the
cache or a directory, or straight into a spaCy pipeline with --as-pipeline."""
from pathlib import Path
from typing import Optional

import typer

from ..io import ModelFileError
from ..io.contributed import pipeline_refusal
from ..io.conversion import pipeline_bilm
from ..io.download_named import describe_published, download_named, download_pair
from ..io.registry import PUBLISHED_CONTRIBUTED, PUBLISHED_MODELS, PUBLISHED_TF_MODELS, published_names
from ._app import app
from ._vocabulary import CommandWithOldSpellings


@app.command("download", cls=CommandWithOldSpellings)
def download_cli(
    name: Optional[str] = typer.Argument(
        None, help=f"a published model: {', '.join(PUBLISHED_MODELS)}, an ELMoForManyLangs language by "
        f"ISO 639 code (de, ru, ar, zh, ...), a TensorFlow one: {', '.join(PUBLISHED_TF_MODELS)}, a contributed "
        f"one: {', '.join(PUBLISHED_CONTRIBUTED)}, or a Hugging Face Hub repository: hf:OWNER/REPO[@REVISION]",
        show_default=False
    ),
    options: Optional[str] = typer.Option(None, "--options-url", help="URL of another published options.json"),
    weights: Optional[str] = typer.Option(None, "--weights-url", help="URL of its HDF5 weights"),
    output: Optional[Path] = typer.Option(
        None, "--output", help="directory for options.json + weights.hdf5 (default: the cache), or with "
        "--as-pipeline the spaCy pipeline to write"
    ),
    pipeline: bool = typer.Option(False, "--as-pipeline", help="write a spaCy pipeline (blank LANG + elmo) to --output"),
    lang: Optional[str] = typer.Option(
        None, "--lang", help="language of the blank pipeline (with --as-pipeline; default: the model's)"
    ),
    allow_http: bool = typer.Option(
        False, "--allow-http", help="also download over plain http (unencrypted: anyone on the way can change "
        "the file); redirects from https to http stay refused"
    ),
) -> None:
    """Download a published ELMo biLM once (resumed if interrupted, verified, SHA-256 recorded),
    into the cache (SPACY_ELMO_CACHE) or --output; with --as-pipeline, also write a spaCy pipeline
    as `convert` does. The published models are hundreds of MB."""
    try:
        if pipeline and output is None:
            raise typer.BadParameter("--as-pipeline writes a spaCy pipeline: give its directory with --output")
        if name is not None and (options is not None or weights is not None):
            raise typer.BadParameter("give a model NAME or --options-url and --weights-url, not both")
        if name is None and (options is None or weights is None):
            raise typer.BadParameter(f"give a model NAME ({published_names()}), or --options-url and --weights-url together")
        refusal = pipeline_refusal(name) if pipeline else None
        if refusal is not None:  # before hundreds of MB are downloaded for nothing
            raise ValueError(refusal)
        directory = None if pipeline else output
        if name is not None:
            typer.echo(describe_published(name), err=True)
            downloaded = download_named(name, directory=directory, allow_http=allow_http)
        else:
            downloaded = download_pair(options, weights, directory=directory, allow_http=allow_http)
        if pipeline:
            from ..pipeline import create_pipeline

            bilm, language = pipeline_bilm(downloaded.model, options=downloaded.options, weights=downloaded.weights,
                                           lang=lang or downloaded.language)
            create_pipeline(bilm, lang=language).to_disk(output)
            typer.echo(f"Wrote a spaCy pipeline to {output}; load it with spacy.load({str(output)!r})")
        else:
            typer.echo(str(downloaded))
    except (ModelFileError, ValueError) as err:
        typer.secho(f"Error: {err}", fg=typer.colors.RED, err=True)
        raise typer.Exit(1) from err
