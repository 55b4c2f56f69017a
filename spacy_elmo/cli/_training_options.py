"""What the biLM training commands (`pretrain`, `finetune`) share: their common options, the time
limit's syntax, and the config read with `--section.key value` overrides from the command line."""
from pathlib import Path
from typing import Optional

import typer
from spacy.cli._util import parse_config_overrides

# extra `--section.key value` arguments reach the command as ctx.args
OVERRIDES = {"allow_extra_args": True, "ignore_unknown_options": True}

OUTPUT = typer.Option(..., "--output", "-o", help="DIR for model-last/, model-best/, checkpoints/")
RESUME = typer.Option(False, "--resume", help="continue from the newest intact checkpoint in DIR")
DEVICE = typer.Option("cpu", "--device", help="torch device: cpu, cuda")


def max_time_option(examples: str):
    """The --max-time option, its help showing ``examples`` of the syntax ``parse_duration`` reads."""
    return typer.Option(None, "--max-time", help=f"time limit of this invocation's setting up and training, e.g. {examples}; "
                        "the last held-out evaluation and the scores after training come on top; a run resumed with "
                        "--resume gets the whole limit again (a stretch each, not a total)")


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


def load_config(ctx: typer.Context, config_path: Path):
    """The training config at ``config_path`` with the command line's overrides.

    RETURNS (LMConfig): the config; a bad file or override is reported as a bad parameter. The first
    thing ``pretrain`` and ``finetune`` do, so it also names oneDNN's kept kernels
    (``training.memory.keep_made_kernels``) before anything makes one.
    """
    from ..training.config import load_lm_config
    from ..training.memory import keep_made_kernels

    keep_made_kernels()

    try:
        return load_lm_config(config_path, parse_config_overrides(ctx.args))
    except ValueError as err:
        raise typer.BadParameter(str(err)) from err


def refused_input(run):
    """Run ``run()`` (a pretrain or finetune), reporting input it refuses (no usable training or
    held-out line, a held-out text wholly out of vocabulary, a missing or binary file, an output
    with another run's checkpoints, a time limit spent before training began) as one line on stderr and exit status 1, no traceback.

    RETURNS: what ``run`` returns.
    """
    from ..io.text_input import BinaryFileError, TextDecodeError
    from ..training.corpus import UnusableCorpus
    from ..training.perplexity import AllOutOfVocabulary
    from ..training.setup import TimeSpent

    refused = (UnusableCorpus, AllOutOfVocabulary, BinaryFileError, TextDecodeError, FileNotFoundError, FileExistsError, TimeSpent)
    try:
        return run()
    except refused as err:
        typer.secho(f"Error: {err}", fg=typer.colors.RED, err=True)
        raise typer.Exit(1) from err
