"""`convert`: a biLM (a published pair, a zip, an ELMoForManyLangs model, our directory) -> spaCy pipeline,
and back with --to-allennlp or --to-efml."""
from pathlib import Path
from typing import Optional

import typer

from ..io import ModelFileError
from ..io.contributed import pipeline_refusal
from ..io.loading import locate_bilm
from ..io.sources import ModelSource
from ._app import app


def build_pipeline(
    output: Path,
    *,
    lang: Optional[str] = None,
    options: Optional[Path] = None,
    weights: Optional[Path] = None,
    model: Optional[Path] = None,
) -> Path:
    """Write a blank ``lang`` pipeline plus an `elmo` component holding the biLM's weights.

    The component's model block is written in the imported shape, so ``spacy.load(output)``
    needs nothing but the output directory.
    lang (Optional[str]): the pipeline's language; default: the model's (``pipeline_language``).
    RETURNS (Path): the pipeline directory.
    """
    from ..pipeline import create_pipeline

    refusal = pipeline_refusal(str(model)) if model is not None else None
    if refusal is not None:  # protein residues, not words: before a published model is downloaded
        raise ValueError(refusal)
    source = locate_bilm(model, options=options, weights=weights, what="convert")
    bilm = source.load()  # a missing or damaged file is the first thing to say, before the language
    lang = lang or pipeline_language(source)
    check_language(lang)
    create_pipeline(bilm, lang=lang).to_disk(output)
    return output


def pipeline_language(source: ModelSource) -> str:
    """The language a pipeline for this biLM gets without ``--lang``: what its source records (a
    published name, an archive's or folder's meta.json, a pipeline's config, English for the
    shipped biLM). Everything else needs ``--lang``: a published pair given as files, a model
    directory of ours (pretrained on any text), an ELMoForManyLangs model or a TensorFlow
    checkpoint that records none: their model may be for any language."""
    if source.language:
        return source.language
    raise ValueError(
        f"{source.description} records no language; give it with --lang "
        "(an ISO 639 code spaCy knows, e.g. en, de, ru, ar; or xx for spaCy's multi-language tokenizer)"
    )


def check_language(lang: str) -> None:
    """Refuse, with what to do, a language whose blank pipeline spaCy cannot make here (unknown to
    spaCy, or a tokenizer needing a package this environment lacks: Japanese, Korean, Vietnamese,
    Chinese word segmentation)."""
    import spacy

    try:
        spacy.blank(lang)
    except ImportError as err:
        raise ValueError(
            f"spaCy cannot make a blank '{lang}' pipeline here: {err} (or use --lang xx, spaCy's "
            "multi-language tokenizer, and tokenize the text yourself)"
        ) from err


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
    model: Optional[str] = typer.Option(
        None, "--model", help="a biLM as load_bilm takes it: our directory, a pipeline, a published pair's "
        "directory or zip, an ELMoForManyLangs directory, or a published name (small, original, de, ru, ...)"
    ),
    lang: Optional[str] = typer.Option(
        None, "--lang", help="language of the blank pipeline (default: the model's where it records one, a published "
        "name's, English for the shipped biLM; needed where the model records none)"
    ),
    to_allennlp: bool = typer.Option(
        False, "--to-allennlp", help="write options.json + weights.hdf5 from --model instead"
    ),
    to_efml: bool = typer.Option(
        False, "--to-efml", help="write an ELMoForManyLangs model directory from --model (an imported or "
        "fine-tuned EFML model) instead"
    ),
) -> None:
    """Make a spaCy pipeline (blank LANG + elmo) from a biLM, or with --to-allennlp export one
    to the published format that bilm-tf and AllenNLP read."""
    try:
        if to_efml:
            if model is None or options is not None or weights is not None or to_allennlp:
                raise typer.BadParameter("--to-efml takes --model (and --output) alone")
            from ..io.efml import export_efml
            from ..io.loading import resolve_bilm

            export_efml(resolve_bilm(model, what="--model"), output)
            typer.echo(f"Wrote an ELMoForManyLangs model directory to {output}")
        elif to_allennlp:
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
