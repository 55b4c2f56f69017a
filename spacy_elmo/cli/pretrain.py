"""`pretrain`: train a biLM language model from a .cfg, as `spacy train` trains a pipeline."""
from pathlib import Path
from typing import Optional

import typer

from ._app import app
from ._training_options import DEVICE, OUTPUT, OVERRIDES, RESUME, load_config, max_time_option, parse_duration, refused_input


@app.command("pretrain", context_settings=OVERRIDES)
def pretrain_cli(
    ctx: typer.Context,
    config_path: Path = typer.Argument(..., exists=True, dir_okay=False, help="biLM training .cfg (see configs/)"),
    output: Path = OUTPUT,
    resume: bool = RESUME,
    max_time: Optional[str] = max_time_option("3000, 50m, 2h"),
    device: str = DEVICE,
) -> None:
    """Pretrain a biLM. Extra `--section.key value` arguments override the config, e.g.
    `--paths.train corpus/ --paths.dev dev.txt --training.max_steps 1000`. Run under
    `torchrun --nproc_per_node N -m spacy_elmo pretrain ...` for distributed training; a group
    torchrun restarts (`--max-restarts`) resumes from the newest checkpoint by itself. A corpus with no
    usable line (empty, every line over the limit, unreadable) is refused before anything is written."""
    from ..training.loop import best_at_interrupt
    from ..training.pretrain import pretrain

    config = load_config(ctx, config_path)
    limit = parse_duration(max_time)
    summary = refused_input(lambda: pretrain(config, output, resume=resume, max_time=limit, device=device))
    best = summary.best_dev
    best_text = f"; best held-out ppl {best['ppl']:.2f} at step {best['step']}" if best and "ppl" in best else ""
    typer.echo(
        f"{summary.steps} steps, {summary.tokens} tokens in {summary.seconds:.0f}s "
        f"({summary.tokens_per_second:.0f} tokens/s){best_text}; stopped by {summary.stop_text}"
    )
    if summary.stopped_by == "interrupted":  # Ctrl-C: its checkpoint is written, --resume continues
        typer.echo("run the same command with --resume to continue" + best_at_interrupt(summary, config.dev is not None))
        raise typer.Exit(130)
