"""`pretrain`: train a biLM language model from a .cfg, as `spacy train` trains a pipeline."""
from pathlib import Path
from typing import Optional

import typer
from spacy.cli._util import parse_config_overrides

from ._app import app

OVERRIDES = {"allow_extra_args": True, "ignore_unknown_options": True}


def parse_duration(value: Optional[str]) -> Optional[float]:
    """Seconds from "90", "90s", "50m" or "1.5h"; None stays None (the config decides)."""
    if value is None:
        return None
    text = value.strip().lower()
    units = {"s": 1.0, "m": 60.0, "h": 3600.0}
    factor = units.get(text[-1:], None)
    number = text[:-1] if factor is not None else text
    try:
        seconds = float(number) * (factor or 1.0)
    except ValueError as err:
        raise typer.BadParameter(f"{value!r}: expected seconds or a number with s, m or h (e.g. 50m)") from err
    if seconds < 0:
        raise typer.BadParameter("the time limit cannot be negative")
    return seconds


@app.command("pretrain", context_settings=OVERRIDES)
def pretrain_cli(
    ctx: typer.Context,
    config_path: Path = typer.Argument(..., exists=True, dir_okay=False, help="biLM training .cfg (see configs/)"),
    output: Path = typer.Option(..., "--output", "-o", help="DIR for model-last/, model-best/, checkpoints/"),
    resume: bool = typer.Option(False, "--resume", help="continue from the newest intact checkpoint in DIR"),
    max_time: Optional[str] = typer.Option(None, "--max-time", help="time limit of this run, e.g. 3000, 50m, 2h"),
    device: str = typer.Option("cpu", "--device", help="torch device: cpu, cuda"),
) -> None:
    """Pretrain a biLM. Extra `--section.key value` arguments override the config, e.g.
    `--paths.train corpus/ --paths.dev dev.txt --training.max_steps 1000`. Run under
    `torchrun --nproc_per_node N -m spacy_elmo pretrain ...` for distributed training."""
    from ..training.config import load_lm_config
    from ..training.pretrain import pretrain

    try:
        config = load_lm_config(config_path, parse_config_overrides(ctx.args))
    except ValueError as err:
        raise typer.BadParameter(str(err)) from err
    summary = pretrain(config, output, resume=resume, max_time=parse_duration(max_time), device=device)
    best = summary.best_dev
    best_text = f"; best held-out ppl {best['ppl']:.2f} at step {best['step']}" if best and "ppl" in best else ""
    typer.echo(
        f"{summary.steps} steps, {summary.tokens} tokens in {summary.seconds:.0f}s "
        f"({summary.tokens_per_second:.0f} tokens/s){best_text}; stopped by {summary.stopped_by}"
    )
