"""`finetune`: continue language-model training of a trained biLM on domain text."""
from pathlib import Path
from typing import Optional

import typer

from ._app import app
from ._training_options import DEVICE, OUTPUT, OVERRIDES, RESUME, load_config, max_time_option, parse_duration, refused_input
from ._vocabulary import CommandWithOldSpellings


@app.command("finetune", cls=CommandWithOldSpellings, context_settings=OVERRIDES)
def finetune_cli(
    ctx: typer.Context,
    config_path: Path = typer.Argument(..., exists=True, dir_okay=False, help="training .cfg ([paths] train/dev: domain text)"),
    output: Path = OUTPUT,
    model: Optional[str] = typer.Option(
        None, "--model", help="our model directory (pretrain output's model-best/ or model-last/), a spaCy "
        "pipeline with an elmo component, a directory or zip with a published pair (and its softmax.hdf5 + "
        "vocab.txt), or a published model name (default: the shipped biLM)"
    ),
    options: Optional[Path] = typer.Option(None, "--options", help="published options.json (with --weights)"),
    weights: Optional[Path] = typer.Option(None, "--weights", help="published HDF5 weights (with --options)"),
    resume: bool = RESUME,
    max_time: Optional[str] = max_time_option("600, 10m"),
    device: str = DEVICE,
) -> None:
    """Fine-tune a biLM on new unlabeled text and report held-out perplexity before and after, on
    the domain's text (--paths.dev) and on a general text (the package ships one for English).
    It trains with fine-tuning's own recipe ([finetune]: Adam at a small rate with a warm-up; the
    command line's --training.optimizer / learning_rate / warmup_steps / lr_schedule override it),
    reads raw text with the model's language's spaCy tokenizer (--corpus.tokenizer auto), and with
    --finetune.add_words N adds the domain's N most frequent new words to the vocabulary and softmax.
    A start with its softmax (our directory, a published pair with softmax.hdf5 + vocab.txt beside
    it, original, original-5.5b) continues with it, its whole vocabulary kept (sampled softmax above
    8,192 words). A start without one (a published pair alone, a pipeline) gets one built for the
    domain vocabulary and warmed up with the biLM frozen for `[finetune] warmup_steps` steps.
    Overrides as in `pretrain`."""
    from ..training.finetune import finetune

    config = load_config(ctx, config_path)
    limit = parse_duration(max_time)
    result = refused_input(lambda: finetune(
        config, output, model=model, options=options, weights=weights, resume=resume, max_time=limit, device=device,
    ))
    if result.before and result.after and "ppl" in result.after:
        typer.echo(f"held-out perplexity {result.before['ppl']:.2f} -> {result.after['ppl']:.2f}")
    before, after = result.before or {}, result.domain_after or {}
    if "ppl_shared" in before and "ppl_shared" in after:
        typer.echo(f"held-out perplexity over the shared vocabulary {before['ppl_shared']:.2f} -> {after['ppl_shared']:.2f}")
    if result.general and result.general.get("ratio") is not None:
        general, key = result.general, result.general["ratio_of"]
        over = " over the shared vocabulary" if key == "ppl_shared" else ""
        typer.echo(f"general held-out perplexity{over} {general['before'][key]:.2f} -> {general['after'][key]:.2f} "
                   f"({general['ratio']:.2f}x)")
    summary = result.summary
    typer.echo(f"{summary.steps} steps, {summary.tokens} tokens ({summary.tokens_per_second:.0f} tokens/s); stopped by {summary.stop_text}")
    if summary.stopped_by == "interrupted":
        raise typer.Exit(130)  # as a shell reports a command Ctrl-C stopped
