"""`dump`: write every biLM layer of every sentence in a file to HDF5, as bilm-tf's dump_bilm_embeddings."""
import sys
from pathlib import Path
from typing import Optional

import typer

from ._app import app
from ._vocabulary import (INPUT, MODEL, OPTIONS, STRICT_UTF8, WEIGHTS, CommandWithOldSpellings, input_files, output_file,
                          report)


@app.command("dump", cls=CommandWithOldSpellings)
def dump_cli(
    input: Path = typer.Option(..., "--input", help=f".json list of token lists, or text one sentence a line: {INPUT}",
                               callback=input_files),
    output: Path = typer.Option(..., "--output", help="HDF5 file to write", callback=output_file),
    model: Optional[str] = MODEL,
    options: Optional[Path] = OPTIONS,
    weights: Optional[Path] = WEIGHTS,
    batch_size: int = typer.Option(64, "--batch-size", min=1),
    exact: bool = typer.Option(False, "--exact", help="the plain float32 computation bit for bit (slower)"),
    strict_utf8: bool = STRICT_UTF8,
) -> None:
    """Write every biLM layer of every input sentence to HDF5.

    Dataset "i" of OUTPUT holds sentence i's layers, shape (L+1, n_tokens, width), as
    bilm-tf's dump_bilm_embeddings wrote them; a sentence longer than 200 tokens runs in windows of
    200, as the elmo component runs it. OUTPUT.partial holds the file until every sentence is in it;
    an interrupted run continues from it when run again.
    """
    from ..io import load_bilm
    from ..io.layer_dump import dump_layers, partial_path
    from ..io.progress import EmbedProgress
    from ..io.text_input import TextStats, read_sentences

    stats = TextStats()
    try:
        sentences = read_sentences(input, strict_utf8=strict_utf8, stats=stats)
        bilm = load_bilm(model, options=options, weights=weights, optimize=not exact)
    except (FileNotFoundError, ValueError) as err:
        raise typer.BadParameter(str(err)) from err
    report(stats)
    line = EmbedProgress(sum(map(len, sentences)), f"{len(sentences):,} sentences", sys.stderr)
    complete = [0]
    try:
        written = dump_layers(bilm, sentences, output, batch_size=batch_size, note=lambda text: typer.echo(text, err=True),
                              progress=lambda done, tokens: (complete.__setitem__(0, done), line.reached(tokens)))
    except KeyboardInterrupt:
        typer.echo(f"\ninterrupted: {partial_path(output)} keeps the {complete[0]:,} sentences complete so far, and "
                   f"{output} is as it was; run the same command again to continue", err=True)
        raise typer.Exit(130)
    line.close()
    typer.echo(f"Wrote {written} sentences to {output}")
