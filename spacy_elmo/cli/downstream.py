"""`downstream-corpus`, `downstream-train`, `downstream-report`: spaCy components trained with and
without ELMo on fractions of a labelled corpus, and the table of their test scores."""
from pathlib import Path
from typing import Optional

import typer

from ._app import app
from ._training_options import OVERRIDES
from ._vocabulary import MODEL


@app.command("downstream-corpus")
def downstream_corpus_cli(
    input_path: Path = typer.Option(..., "--input", exists=True, dir_okay=False, help="the labelled file"),
    kind: str = typer.Option(..., "--kind", help="ud (CoNLL-U: UPOS) or ner (CoNLL columns, IOB1 or IOB2)"),
    output: str = typer.Option(..., "--output", help="the .spacy file to write; {pct} stands for the fraction in percent"),
    fractions: str = typer.Option("100", "--fractions", help="percent of the sentences, comma-separated, in (0, 100]"),
    seed: int = typer.Option(0, "--seed", help="seed of the shuffle that picks each fraction (nested)"),
    n_sents: int = typer.Option(10, "--n-sents", min=1, help="sentences per Doc"),
) -> None:
    """Write a labelled file as .spacy, whole or as seeded, nested fractions of its sentences."""
    from ..downstream.corpus import convert_fractions

    try:
        written = convert_fractions(kind, input_path, output, fractions, seed=seed, n_sents=n_sents)
    except ValueError as err:
        raise typer.BadParameter(str(err)) from err
    for path, (docs, sentences, tokens) in written:
        typer.echo(f"{path}: {docs} docs, {sentences} sentences, {tokens} tokens")


@app.command("downstream-train", context_settings=OVERRIDES)
def downstream_train_cli(
    ctx: typer.Context,
    input_path: Path = typer.Option(..., "--input", exists=True, file_okay=False, help="folder of <task>-{train-<pct>,dev,test}.spacy"),
    output: Path = typer.Option(..., "--output", help="folder for models/ and metrics/"),
    configs: Path = typer.Option(Path("configs"), "--configs", exists=True, file_okay=False,
                                 help="folder of the task configs: tagger.cfg, tagger-elmo.cfg, ner.cfg, ..."),
    model: Optional[str] = MODEL,
    tasks: str = typer.Option("upos,ner", "--tasks", help="comma-separated: upos, ner, textcat"),
    fractions: str = typer.Option("1,10,100", "--fractions", help="percent of the training sentences, comma-separated (the files downstream-corpus wrote)"),
    settings: str = typer.Option("plain,elmo", "--settings", help="comma-separated: plain, elmo"),
) -> None:
    """Train each task on each fraction with and without ELMo (`spacy train`) and score it on test;
    the elmo setting uses --model. Cells already in OUTPUT/metrics are skipped. Overrides as with
    `spacy train` (--training.max_steps 300)."""
    from spacy.cli._util import parse_config_overrides

    from ..downstream.runs import run_cells

    try:
        run_cells(input_path, output, configs=configs, elmo=model, tasks=tasks, fractions=fractions, settings=settings,
                  overrides=parse_config_overrides(ctx.args))
    except ValueError as err:
        raise typer.BadParameter(str(err)) from err


@app.command("downstream-report")
def downstream_report_cli(
    input_path: Path = typer.Option(..., "--input", exists=True, file_okay=False, help="the metrics folder downstream-train wrote"),
    table: Path = typer.Option(..., "--table", help="markdown file to write"),
    plot: Optional[Path] = typer.Option(None, "--plot", help="PNG file to write (needs matplotlib: the plot extra)"),
    records: Optional[Path] = typer.Option(None, "--records", help="also write every run's metrics here (JSON)"),
    title: str = typer.Option("", "--title", help="heading of the table and the plot"),
) -> None:
    """The markdown table (and plot) of the test scores with and without ELMo."""
    from ..downstream.report import write_report

    try:
        typer.echo(write_report(input_path, table, plot_path=plot, records=records, title=title))
    except ValueError as err:
        raise typer.BadParameter(str(err)) from err
