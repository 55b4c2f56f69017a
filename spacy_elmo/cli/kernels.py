"""`kernels`: the kernel library for this machine (fast/kernel_library.py: the compiled LSTM step
and the bf16 and int8 products): which variant this CPU runs (fast/kernel_variants.py; the best it
can execute, or $SPACY_ELMO_KERNEL_VARIANT) and which it cannot, where its library is, whether it is
built, verified against its build record and loaded, or why not; `--build` builds it now where it is
missing or does not verify (again in any case with `--force`)."""
import json

import typer

from ..fast import kernel_library
from ._app import app


@app.command("kernels")
def kernels_cli(
    build: bool = typer.Option(False, "--build", help="build the library now if it is missing or refused (retrying a failed build)"),
    force: bool = typer.Option(False, "--force", help="with --build: build it again even if it verifies"),
) -> None:
    """Show (or build) the compiled LSTM step that the optimized inference path uses on this CPU."""
    if build:
        try:
            path = kernel_library.library_path()
            stale = not path.exists() or kernel_library.refusal(path) is not None
            kernel_library.load(build=True, force=force or stale)
        except kernel_library.KernelBuildError as error:
            typer.echo(json.dumps(kernel_library.status(), indent=2))
            typer.echo(f"build failed: {error}", err=True)
            raise typer.Exit(1)
    typer.echo(json.dumps(kernel_library.status(), indent=2))
