"""`probe`: what each biLM layer knows: linear and nearest-neighbour probes of syntax and word sense."""
from pathlib import Path
from typing import Optional

import typer

from ._app import app
from ._vocabulary import MODEL, OPTIONS, WEIGHTS, CommandWithOldSpellings


@app.command("probe", cls=CommandWithOldSpellings)
def probe_cli(
    output: Path = typer.Option(..., "--output", help="directory for probe.json, probe.md and probe.png"),
    task: str = typer.Option("all", "--task", help="all (upos, wsd, wic), upos, ner, wsd, wic, or a comma-separated list"),
    train: Optional[Path] = typer.Option(None, "--train", help="the task's training file (default: under --data-dir)"),
    eval_file: Optional[Path] = typer.Option(None, "--eval", help="the task's evaluation file (default: under --data-dir)"),
    model: Optional[str] = MODEL,
    options: Optional[Path] = OPTIONS,
    weights: Optional[Path] = WEIGHTS,
    train_fraction: Optional[float] = typer.Option(None, "--train-fraction", help="seeded share of the training data (default per task)"),
    max_sentences: Optional[int] = typer.Option(None, "--max-sentences", min=1, help="at most this many train and eval items per task"),
    seed: int = typer.Option(0, "--seed"),
    data_dir: Optional[Path] = typer.Option(None, "--data-dir", help="where the default data lie (default: $SPACY_ELMO_DATA, else ./assets/datasets, where `spacy project assets --extra` puts them)"),
    cache_dir: Optional[Path] = typer.Option(None, "--cache-dir", help="keep the biLM's vectors here, by weights and file hash"),
    batch_size: int = typer.Option(64, "--batch-size", min=1),
    threads: int = typer.Option(0, "--threads", min=0, help="torch threads (0: torch's default)"),
) -> None:
    """Score every biLM layer alone, their mean and a learned scalar mix on syntax (UPOS, NER) and word sense (WSD, WiC), beside majority-class and word-identity baselines; write OUT/probe.json, probe.md and probe.png and print the table.

    Defaults: upos trains on 10% of EWT train and scores EWT dev; wsd holds out a seeded 20% of 400 Senseval uses a word; wic tunes its thresholds on 40% of WiC train and scores WiC test; ner (on request) trains on 10% of CoNLL-2003 train and scores its dev set.
    """
    import torch

    from ..probes import run_probe

    if threads:
        torch.set_num_threads(threads)
    try:
        result = run_probe(
            task, model=model, options=options, weights=weights, train=train, eval=eval_file,
            train_fraction=train_fraction, max_sentences=max_sentences, seed=seed, data_dir=data_dir,
            cache_dir=cache_dir, batch_size=batch_size, output=output,
        )
    except (FileNotFoundError, ValueError) as err:
        raise typer.BadParameter(str(err)) from err
    typer.echo(result.table())
    typer.echo(f"\n{result.seconds:.0f} s; written to {output}/probe.json, probe.md" + (", probe.png" if (output / "probe.png").is_file() else ""))
