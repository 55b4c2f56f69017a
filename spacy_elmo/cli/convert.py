"""`convert`: a biLM (a published pair, a zip, an ELMoForManyLangs model, our directory) -> spaCy pipeline,
and back with --to-allennlp or --to-efml."""
from pathlib import Path
from typing import Optional

import typer

from ..io import ModelFileError
from ..io.conversion import export_pipeline_bilm, pipeline_bilm
from ._app import app


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
        None, "--lang", help="language of the blank pipeline (default: the model's where it records one: a published "
        "name's, English for the shipped biLM, the language a pretrain or finetune output was trained in; needed "
        "where the model records none)"
    ),
    to_allennlp: bool = typer.Option(
        False, "--to-allennlp", help="write options.json + weights.hdf5 from --model instead (and, where the model "
        "has one, its softmax and vocabulary beside them as softmax.hdf5 + vocab.txt: AllenNLP's format has none)"
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
            export_pipeline_bilm(model, output, layout="efml")
            typer.echo(f"Wrote an ELMoForManyLangs model directory to {output}")
        elif to_allennlp:
            if model is None or options is not None or weights is not None:
                raise typer.BadParameter("--to-allennlp takes --model (and --output), not --options/--weights")
            from ..io.lm_head import write_published_head
            from ..io.loading import locate_bilm

            source = locate_bilm(model, what="--model")
            # the head our training wrote beside the weights (a damaged one refused before anything is
            # written); a published model's softmax is published already, and is not downloaded for this
            head = source.head() if source.training_vocabulary() is not None else None
            export_pipeline_bilm(model, output)
            typer.echo(f"Wrote {output / 'options.json'} and {output / 'weights.hdf5'}")
            if head is None:
                typer.echo("AllenNLP's format holds the biLM only, no softmax or vocabulary; this model has none to "
                           "write beside it")
            else:
                softmax, vocabulary = write_published_head(head, output)
                typer.echo(f"AllenNLP's format holds the biLM only, no softmax or vocabulary: wrote the model's "
                           f"{len(head)}-word softmax and vocabulary beside it as {softmax.name} + {vocabulary.name} "
                           "(bilm-tf's published layout, which evaluate and finetune read with that folder as --model; "
                           "AllenNLP ignores them)")
        else:
            if model is None and (options is None or weights is None):
                raise typer.BadParameter("give --options and --weights (a published pair), or --model")
            from ..pipeline import create_pipeline

            bilm, language = pipeline_bilm(model, options=options, weights=weights, lang=lang)
            output.parent.mkdir(parents=True, exist_ok=True)  # a new nested folder: spaCy makes the last part only
            create_pipeline(bilm, lang=language).to_disk(output)
            typer.echo(f"Wrote a spaCy pipeline to {output}; load it with spacy.load({str(output)!r})")
    except (ModelFileError, ValueError) as err:
        typer.secho(f"Error: {err}", fg=typer.colors.RED, err=True)
        raise typer.Exit(1) from err
