"""`convert`: published options + HDF5 pair (or our directory) -> spaCy pipeline, and back with --to-allennlp."""
from pathlib import Path
from typing import Optional

import typer

from ..io import ModelFileError
from ._app import app


def build_pipeline(
    output: Path,
    *,
    lang: str = "en",
    options: Optional[Path] = None,
    weights: Optional[Path] = None,
    model: Optional[Path] = None,
) -> Path:
    """Write a blank ``lang`` pipeline plus an `elmo` component holding the biLM's weights.

    The component's model block is written in the imported shape, so ``spacy.load(output)``
    needs nothing but the output directory.
    RETURNS (Path): the pipeline directory.
    """
    from ..pipeline import create_pipeline, initial_bilm

    create_pipeline(initial_bilm(options=options, weights=weights, model=model), lang=lang).to_disk(output)
    return output


def export_pipeline_bilm(model: Path, output: Path) -> None:
    """Write the biLM of a spacy-elmo directory or of a pipeline's elmo component as
    ``output/options.json`` + ``output/weights.hdf5`` in the published layout."""
    from ..io import export_allennlp
    from ..io.loading import resolve_bilm

    bilm = resolve_bilm(model, what="--model")
    export_allennlp(bilm, output / "options.json", output / "weights.hdf5")


@app.command("convert")
def convert_cli(
    output: Path = typer.Option(..., "--output", help="directory to write"),
    options: Optional[Path] = typer.Option(None, "--options", help="published options.json"),
    weights: Optional[Path] = typer.Option(None, "--weights", help="published HDF5 weights"),
    model: Optional[Path] = typer.Option(
        None, "--model", help="spacy-elmo model directory, or a spaCy pipeline with an elmo component"
    ),
    lang: str = typer.Option("en", "--lang", help="language of the blank pipeline"),
    to_allennlp: bool = typer.Option(
        False, "--to-allennlp", help="write options.json + weights.hdf5 from --model instead"
    ),
) -> None:
    """Make a spaCy pipeline (blank LANG + elmo) from a biLM, or with --to-allennlp export one
    to the published format that bilm-tf and AllenNLP read."""
    try:
        if to_allennlp:
            if model is None or options is not None or weights is not None:
                raise typer.BadParameter("--to-allennlp takes --model (and --output), not --options/--weights")
            export_pipeline_bilm(model, output)
            typer.echo(f"Wrote {output / 'options.json'} and {output / 'weights.hdf5'}")
        else:
            if model is None and (options is None or weights is None):
                raise typer.BadParameter("give --options and --weights (a published pair), or --model")
            build_pipeline(output, lang=lang, options=options, weights=weights, model=model)
            typer.echo(f"Wrote a spaCy pipeline to {output}; load it with spacy.load({str(output)!r})")
    except (ModelFileError, ValueError) as err:
        typer.secho(f"Error: {err}", fg=typer.colors.RED, err=True)
        raise typer.Exit(1) from err
