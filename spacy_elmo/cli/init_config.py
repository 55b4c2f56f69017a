"""`init-config`: the recommended training config of a task with ELMo, for a named biLM (the configs
are installed with the package)."""
from pathlib import Path
from typing import Optional

import typer

from ..configs import TASKS, downstream_config
from ..files import write_atomic
from ._app import app
from ._vocabulary import CommandWithOldSpellings, output_file


@app.command("init-config", cls=CommandWithOldSpellings)
def init_config_cli(
    task: str = typer.Argument(..., help=f"the component to train: {', '.join(TASKS)}", show_default=False),
    model: Optional[str] = typer.Option(
        None, "--model", help="the biLM the config loads at initialization: a published name, a path, ... "
        "(written into [paths] elmo, not read here); default: the shipped en_small"
    ),
    output: Optional[Path] = typer.Option(
        None, "--output", help="the .cfg file to write (default: standard output)", callback=output_file
    ),
) -> None:
    """Write the training config the docs recommend for TASK with the biLM --model: the installed
    TASK-elmo.cfg with [paths] elmo set, its frozen cache and threads following the biLM's size.
    Then: python -m spacy train CONFIG --paths.train train.spacy --paths.dev dev.spacy --output OUT."""
    try:
        text = downstream_config(task, model)
    except ValueError as err:
        raise typer.BadParameter(str(err)) from None
    if output is None:
        typer.echo(text, nl=False)
        return
    try:
        # as spaCy's init config: a folder the file goes in is made
        output.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(output, text.encode("utf-8"))
    except OSError as err:
        raise typer.BadParameter(f"cannot write {output}: {err.strerror}", param_hint="--output") from None
    typer.echo(f"wrote {output}", err=True)
