"""`neighbors`: corpus sentences that use a word in the same sense as a query sentence."""
import json
from itertools import islice
from pathlib import Path
from typing import Optional

import typer

from ._app import app
from ._vocabulary import (INPUT, MODEL, OPTIONS, STRICT_UTF8, WEIGHTS, CommandWithOldSpellings, input_files, output_file,
                          report)


@app.command("neighbors", cls=CommandWithOldSpellings)
def neighbors_cli(
    input: Path = typer.Option(..., "--input", help=f"the corpus, one sentence or paragraph a line (longer than 200 tokens: "
                               f"in windows of 200): {INPUT}", callback=input_files),
    query: str = typer.Option(..., "--query", help="the query sentence"),
    word: str = typer.Option(..., "--word", help="the target word (its first occurrence in the query)"),
    model: Optional[str] = MODEL,
    options: Optional[Path] = OPTIONS,
    weights: Optional[Path] = WEIGHTS,
    top: int = typer.Option(5, "--top", min=1, help="neighbours to show"),
    lang: str = typer.Option("en", "--lang", help="spaCy language whose tokenizer splits the text"),
    max_lines: int = typer.Option(50000, "--max-lines", min=1, help="read at most this many corpus lines"),
    layers: str = typer.Option("mean", "--layers", help="'mean' of all layers, or a layer index (0 = char-CNN)"),
    exact: bool = typer.Option(False, "--exact", help="the plain float32 computation bit for bit (slower)"),
    strict_utf8: bool = STRICT_UTF8,
    output: Optional[Path] = typer.Option(
        None, "--output", help="also write the neighbours as JSON (with the command, commit, CPU and date)", callback=output_file
    ),
) -> None:
    """Show the corpus uses of WORD closest to its use in QUERY (ELMo), and layer 0's nearest words (static)."""
    import spacy

    from ..io import load_bilm
    from ..io.text_input import TextStats, read_lines
    from ..probes.neighbors import parse_query, search_neighbors
    from ..records.provenance import data_record, model_name, model_record, portable_path, provenance

    tokenizer = spacy.blank(lang).tokenizer
    stats = TextStats()
    try:
        parse_query(tokenizer, query, word)  # before the model loads
        bilm = load_bilm(model, options=options, weights=weights, optimize=not exact)
        lines = islice(read_lines(input, strict_utf8=strict_utf8, stats=stats), max_lines)
        found = search_neighbors(bilm, lines, tokenizer, query, word, k=top, layer=layers)
    except (FileNotFoundError, ValueError) as err:
        raise typer.BadParameter(str(err)) from err
    report(stats)
    typer.echo(f"Query: {' '.join(found.query)}  (target: {found.query[found.position]})")
    described = "mean of layers" if found.layer == "mean" else f"layer {found.layer}"
    typer.echo(f"ELMo ({described}), {found.uses} corpus sentences use {word!r}; {found.uses_seen} uses seen, "
               f"the {found.uses_kept} nearest kept:")
    for hit in found.neighbors:
        typer.echo(f"  {hit.score:.3f}  {hit.highlighted()}")
    typer.echo("Static (layer 0 alone), nearest words:")
    for other, score in found.static:
        typer.echo(f"  {score:.3f}  {other}")
    if output is not None:
        record = {"provenance": provenance(model=model_record(model, options=options, weights=weights), data=data_record([input])),
                  "model": model_name(model, options, weights), "corpus": portable_path(input), **found.to_dict()}
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(json.dumps(record, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
