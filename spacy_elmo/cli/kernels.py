"""`kernels`: the compiled LSTM step for this machine (fast/compiled.py): where it is,
whether it is built and loaded, or why not; `--build` builds it now (again, with `--force`)."""
import json

import typer

from ..fast import compiled
from ._app import app


@app.command("kernels")
def kernels_cli(
    build: bool = typer.Option(False, "--build", help="build the library now if it is missing (retrying a failed build)"),
    force: bool = typer.Option(False, "--force", help="with --build: build it again even if it exists"),
) -> None:
    """Show (or build) the compiled LSTM step that the optimized inference path uses on this CPU."""
    if build:
        try:
            compiled.load(build=True, force=True if force else not compiled.library_path().exists())
        except compiled.KernelBuildError as error:
            typer.echo(json.dumps(compiled.status(), indent=2))
            typer.echo(f"build failed: {error}", err=True)
            raise typer.Exit(1)
    typer.echo(json.dumps(compiled.status(), indent=2))
