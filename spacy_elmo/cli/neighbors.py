"""`neighbors`: corpus sentences that use a word in the same sense as a query sentence."""
import json
from pathlib import Path
from typing import Optional

import typer

from ..io import load_bilm
from ..probes.neighbors import SenseIndex, static_neighbors
from ..records.provenance import data_record, model_record, portable_path, provenance
from ._app import app


@app.command("neighbors")
def neighbors_cli(
    corpus: Path = typer.Option(..., "--corpus", help="text file, one sentence or paragraph per line"),
    query: str = typer.Option(..., "--query", help="the query sentence"),
    word: str = typer.Option(..., "--word", help="the target word (its first occurrence in the query)"),
    model: Optional[Path] = typer.Option(None, "--model", help="spacy-elmo model directory"),
    options: Optional[Path] = typer.Option(None, "--options", help="published options.json"),
    weights: Optional[Path] = typer.Option(None, "--weights", help="published HDF5 weights"),
    k: int = typer.Option(5, "--k", min=1, help="neighbours to show"),
    lang: str = typer.Option("en", "--lang", help="spaCy language whose tokenizer splits the text"),
    max_lines: int = typer.Option(50000, "--max-lines", min=1, help="read at most this many corpus lines"),
    layer: str = typer.Option("mean", "--layer", help="'mean' of all layers, or a layer index (0 = char-CNN)"),
    exact: bool = typer.Option(False, "--exact", help="the plain float32 computation bit for bit (slower)"),
    output: Optional[Path] = typer.Option(
        None, "--output", help="also write the neighbours as JSON (with the command, commit, CPU and date)"
    ),
) -> None:
    """Show the corpus uses of WORD closest to its use in QUERY (ELMo), and layer 0's nearest words (static)."""
    import spacy

    tokenizer = spacy.blank(lang).tokenizer
    if not corpus.is_file():
        raise typer.BadParameter(f"{corpus}: corpus file not found")
    query_tokens = [t.text for t in tokenizer(query)]
    lowered = [t.lower() for t in query_tokens]
    if word.lower() not in lowered:
        raise typer.BadParameter(f"{word!r} is not a token of the query {query_tokens}")
    position = lowered.index(word.lower())
    bilm = load_bilm(model, options=options, weights=weights, optimize=not exact)
    with corpus.open(encoding="utf-8", errors="replace") as handle:
        lines = [line.strip() for _, line in zip(range(max_lines), handle)]
    sentences = [[t.text for t in doc if not t.is_space] for doc in tokenizer.pipe(line for line in lines if line)]
    chosen = layer if layer == "mean" else int(layer) if layer.lstrip("-").isdigit() else None
    if chosen is None:
        raise typer.BadParameter(f"--layer must be 'mean' or a layer index, not {layer!r}")
    index = SenseIndex(bilm, sentences, words=[word], layer=chosen)
    typer.echo(f"Query: {' '.join(query_tokens)}  (target: {query_tokens[position]})")
    described = "mean of layers" if chosen == "mean" else f"layer {chosen}"
    typer.echo(f"ELMo ({described}), {len(index)} corpus sentences use {word!r}:")
    hits = index.query(query_tokens, position, k=k)
    for hit in hits:
        typer.echo(f"  {hit.score:.3f}  {hit.highlighted()}")
    vocabulary = {t for s in sentences for t in s if t.isalpha()}
    typer.echo("Static (layer 0 alone), nearest words:")
    static = static_neighbors(bilm, word, vocabulary, k=k)
    for other, score in static:
        typer.echo(f"  {score:.3f}  {other}")
    if output is not None:
        record = {
            "provenance": provenance(model=model_record(model, options=options, weights=weights), data=data_record([corpus])),
            "model": portable_path(model) if model else f"{portable_path(options)} + {portable_path(weights)}" if options else "shipped en_small",
            "corpus": portable_path(corpus),
            "corpus_sentences": len(sentences),
            "query": query_tokens,
            "word": query_tokens[position],
            "layer": chosen,
            "sentences_using_word": len(index),
            "neighbors": [{"score": h.score, "sentence": " ".join(h.sentence), "position": h.position} for h in hits],
            "static_neighbors": [{"score": score, "word": other} for other, score in static],
        }
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(json.dumps(record, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
