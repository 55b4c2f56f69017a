"""`kernels`: the kernel library for this machine (fast/kernel_library.py: the compiled LSTM step
and the bf16 and int8 products): which variant this CPU runs (fast/kernel_variants.py; the best it
can execute, or $SPACY_ELMO_KERNEL_VARIANT) and which it cannot, where its library is, whether it is
built, verified against its build record and loaded, or why not; `--build` builds it now where it is
missing or does not verify (again in any case with `--force`). `fp32_routes` says where the fp32
products may run (fast/prepacked.py: torch's, MKL on CPU, or oneDNN's on prepacked weights) and how
the route is chosen; `--routes` loads the shipped model (or `--model`), optimizes it as the component
does, measures the routes for it on this machine anew (fast/payoff.py::choose_routes) and keeps the
choice for later processes (fast/route_cache.py), replacing the one kept."""
import json
from typing import Optional

import torch
import typer

from ..fast import kernel_library, optimize_for_inference, payoff
from ..records.machine import fp32_routes
from ._app import app
from ._vocabulary import MODEL

HOW_ROUTES_ARE_CHOSEN = (
    "per model, when optimize_for_inference runs (the component's default path): each regime's products "
    f"(one sentence: a timestep of one row; batch: a timestep of {payoff.ROUTE_ROWS['batch']} rows and "
    f"{payoff.ROUTE_INPUT_ROWS} positions' input products) timed on the model's own weights in torch's route and "
    f"oneDNN's, {payoff.ROUNDS} interleaved rounds; oneDNN's only where it is faster by more than "
    f"{round(100 * (payoff.ROUTE_MARGIN - 1))}% in the median round and at best "
    f"({payoff.ENV}=0: torch's, unmeasured); measured once per machine, model shape and thread count "
    "and kept in the kernel folder's routes.json for later processes (kernels --routes measures again)"
)


@app.command("kernels")
def kernels_cli(
    build: bool = typer.Option(False, "--build", help="build the library now if it is missing or refused (retrying a failed build)"),
    force: bool = typer.Option(False, "--force", help="with --build: build it again even if it verifies"),
    routes: bool = typer.Option(False, "--routes", help="measure the fp32 products' routes for the model here anew and keep the choice"),
    model: Optional[str] = MODEL,
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
    if model is not None and not routes:
        raise typer.BadParameter("--model names the model whose routes --routes measures: add --routes")
    if routes:
        from ..io.loading import resolve_bilm

        with payoff.measuring_anew():
            optimize_for_inference(resolve_bilm(model))
    state = kernel_library.status()
    state["fp32_routes"] = {**fp32_routes(), "threads": torch.get_num_threads(), "how": HOW_ROUTES_ARE_CHOSEN}
    typer.echo(json.dumps(state, indent=2))
