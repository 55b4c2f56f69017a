"""`vectors`: choose a model's default token vectors (which layers, in what mix) by WiC accuracy."""
from pathlib import Path
from typing import List, Optional

import typer

from ._app import app


@app.command("vectors")
def vectors_cli(
    model: Path = typer.Option(..., "--model", exists=True, file_okay=False, help="our model directory (config.json + "
                               "model.safetensors): a pretrain or finetune output's model-best/, say"),
    wic: Path = typer.Option(..., "--wic", exists=True, file_okay=False, help="the WiC release: a folder holding train/ "
                             "and dev/ (https://pilehvar.github.io/wic/)"),
    input: Optional[List[Path]] = typer.Option(
        None, "--input", exists=True, dir_okay=False, help="text, one tokenized sentence a line, whose layer means "
        "the centred candidates take off (repeatable; default: the package's general English text)"
    ),
    output: Optional[Path] = typer.Option(None, "--output", help="also write the record (JSON: every candidate's score)"),
    write: bool = typer.Option(False, "--write", help="write the chosen setting into MODEL/vectors.json"),
) -> None:
    """Choose a model's default token vectors by WiC train accuracy, as the shipped model's were:
    every mix of its layers on a 0.1 grid, as they are and with each layer's corpus mean taken off,
    and the plain mean; prints the choice and WiC dev accuracy, and with --write stores it in
    vectors.json (a fine-tuned model keeps its start's setting until this chooses anew)."""
    from ..pipeline import create_pipeline
    from ..probes.vector_choice import choose_vectors
    from ..training.finetune import GENERAL_TEXTS

    files = list(input) if input else [GENERAL_TEXTS["en"]]
    licences = "" if input else "CC BY-SA 4.0 (UD English EWT test, half): spacy_elmo/training/general/ATTRIBUTION.md"
    try:
        record, setting = choose_vectors(model, wic, files, create_pipeline, output=output, write=write, licences=licences)
    except (FileNotFoundError, ValueError) as err:
        raise typer.BadParameter(str(err)) from err
    chosen = record["chosen"]
    typer.echo(f"chosen: layers {chosen['layer_weights']}{', means taken off' if chosen['means_taken_off'] else ''} "
               f"(WiC train {chosen['wic_train']}); WiC dev {record['wic_dev']['chosen']} against "
               f"{record['wic_dev']['previous_default']} with the mean of the layers")
    if write:
        typer.echo(f"wrote {model / 'vectors.json'}")
