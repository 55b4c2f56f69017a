"""`download`: a published ELMo biLM by name (or any published pair by URL), verified, into the
cache or a directory, or straight into a spaCy pipeline with --as-pipeline."""
from pathlib import Path
from typing import Optional, Tuple

import typer

from ..io import ModelFileError
from ..io.archive import fetch_archive
from ..io.contributed import fetch_contributed, pipeline_refusal
from ..io.download import fetch_pair, fetch_published, url_pair_dir
from ..io.registry import (
    PUBLISHED_ARCHIVES, PUBLISHED_CONTRIBUTED, PUBLISHED_MODELS, PUBLISHED_TF_MODELS, published_model, published_names,
)
from ..io.tf_layouts import fetch_tf_model
from ._app import app
from ._vocabulary import CommandWithOldSpellings
from .convert import build_pipeline


def fetch_for_cli(
    name: Optional[str],
    options: Optional[str],
    weights: Optional[str],
    directory: Optional[Path],
    *,
    allow_http: bool = False,
) -> Tuple[Path, Path]:
    """The published pair a `download` command line names: a registered name, or two URLs.

    directory (Optional[Path]): where the files go (default: the cache).
    allow_http (bool): download over plain http too (with a warning).
    RETURNS (Tuple[Path, Path]): options.json and weights.hdf5, verified.
    """
    if name is not None:
        if options is not None or weights is not None:
            raise typer.BadParameter("give a model NAME or --options-url and --weights-url, not both")
        if name in PUBLISHED_CONTRIBUTED:
            contributed = PUBLISHED_CONTRIBUTED[name]
            where = contributed.archive or contributed.options_url()
            typer.echo(f"{name}: AllenNLP's format ({where}), trained on {contributed.trained_on}", err=True)
            return fetch_contributed(name, directory=directory, allow_http=allow_http)
        model = published_model(name)
        typer.echo(
            f"{model.name}: {model.shape}, {model.parameters}M parameters, about {model.size_mb:,.0f} MB "
            f"(trained on {model.trained_on})",
            err=True,
        )
        return fetch_published(name, directory=directory, allow_http=allow_http)
    if options is None or weights is None:
        raise typer.BadParameter(f"give a model NAME ({published_names()}), or --options-url and --weights-url together")
    return fetch_pair(options, weights, directory or url_pair_dir(options, weights), allow_http=allow_http)


def fetch_archive_for_cli(name: str, directory: Optional[Path], *, allow_http: bool = False) -> Path:
    """The unpacked model directory of a published archive (an ELMoForManyLangs language), or the
    .tar.gz of a published TensorFlow biLM (read in place)."""
    if name in PUBLISHED_TF_MODELS:
        tf_model = PUBLISHED_TF_MODELS[name]
        typer.echo(f"{name}: a {tf_model.layout} .tar.gz ({tf_model.url}), trained on {tf_model.trained_on}", err=True)
        return fetch_tf_model(name, directory=directory, allow_http=allow_http)
    archive = PUBLISHED_ARCHIVES[name]
    typer.echo(f"{name}: ELMoForManyLangs {archive.language} ({archive.url}), a zip of a few hundred MB", err=True)
    return fetch_archive(name, directory=directory, allow_http=allow_http)


@app.command("download", cls=CommandWithOldSpellings)
def download_cli(
    name: Optional[str] = typer.Argument(
        None, help=f"a published model: {', '.join(PUBLISHED_MODELS)}, an ELMoForManyLangs language by "
        f"ISO 639 code (de, ru, ar, zh, ...), a TensorFlow one: {', '.join(PUBLISHED_TF_MODELS)}, or a contributed "
        f"one: {', '.join(PUBLISHED_CONTRIBUTED)}", show_default=False
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
        if (name in PUBLISHED_ARCHIVES or name in PUBLISHED_TF_MODELS) and options is None and weights is None:
            model = fetch_archive_for_cli(name, None if pipeline else output, allow_http=allow_http)
            if pipeline:
                language = PUBLISHED_TF_MODELS[name].language if name in PUBLISHED_TF_MODELS else name
                build_pipeline(output, lang=lang or language, model=model)
                typer.echo(f"Wrote a spaCy pipeline to {output}; load it with spacy.load({str(output)!r})")
            else:
                typer.echo(f"Verified and unpacked {model}")
            return
        refusal = pipeline_refusal(name) if pipeline else None
        if refusal is not None:  # before hundreds of MB are downloaded for nothing
            raise ValueError(refusal)
        files = fetch_for_cli(name, options, weights, None if pipeline else output, allow_http=allow_http)
        if pipeline:
            language = PUBLISHED_CONTRIBUTED[name].language if name in PUBLISHED_CONTRIBUTED else "en"
            build_pipeline(output, lang=lang or language, options=files[0], weights=files[1])
            typer.echo(f"Wrote a spaCy pipeline to {output}; load it with spacy.load({str(output)!r})")
        else:
            typer.echo(f"Verified {files[0]} and {files[1]}")
    except (ModelFileError, ValueError) as err:
        typer.secho(f"Error: {err}", fg=typer.colors.RED, err=True)
        raise typer.Exit(1) from err
