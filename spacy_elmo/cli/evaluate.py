"""`evaluate`: exact held-out perplexity (forward, backward, geometric mean) of a trained biLM."""
import json
from pathlib import Path
from typing import Optional

import typer

from ._app import app


@app.command("evaluate")
def evaluate_cli(
    model: Path = typer.Option(..., "--model", help="a pretrain/finetune output model directory (with vocab.txt and softmax)"),
    data: str = typer.Option(..., "--data", help="held-out text: files, directories, globs (comma-separated)"),
    tokenizer: str = typer.Option("whitespace", "--tokenizer", help="'whitespace' or a spaCy language code"),
    fmt: str = typer.Option("auto", "--format", help="auto, txt, jsonl or spacy"),
    max_sentence_tokens: Optional[int] = typer.Option(None, "--max-sentence-tokens", help="cut longer lines (default: as trained)"),
    max_segments: int = typer.Option(0, "--max-segments", help="score only the first N segments (0: all)"),
    batch_size: int = typer.Option(64, "--batch-size", min=1),
    output: Optional[Path] = typer.Option(None, "--output", help="also write the numbers as JSON (with the command, commit, CPU and date)"),
) -> None:
    """Exact held-out perplexity of a trained biLM (forward, backward, geometric mean).

    Every line is scored as a sentence <S> .. </S> with the full softmax; words outside the model's
    vocabulary count as <UNK> (the OOV rate is reported: perplexities over different vocabularies
    do not compare)."""
    from ..provenance import data_record, model_record, portable_path, provenance
    from ..training.corpus import resolve_paths
    from ..training.model_dir import load_lm, trained_max_sentence_tokens
    from ..training.perplexity import corpus_perplexity

    try:
        lm, vocab = load_lm(model)
    except ValueError as err:  # a damaged file (ModelFileError) or no softmax to score with
        raise typer.BadParameter(str(err)) from err
    if max_sentence_tokens is None:
        max_sentence_tokens = trained_max_sentence_tokens(model)
    perplexity, stats = corpus_perplexity(
        lm, vocab, data, fmt=fmt, tokenizer=tokenizer, max_sentence_tokens=max_sentence_tokens,
        max_segments=max_segments, batch_size=batch_size,
    )
    result = perplexity.to_dict()
    result.update({
        "model": portable_path(model), "data": ",".join(portable_path(p.strip()) for p in data.split(",") if p.strip()),
        "vocab_size": len(vocab), "corpus": stats.to_dict(),
        "provenance": provenance(model=model_record(model), data=data_record(resolve_paths(data))),
    })
    typer.echo(
        f"perplexity {result['ppl']:.2f} (forward {result['forward_ppl']:.2f}, backward {result['backward_ppl']:.2f}) "
        f"over {result['tokens']} tokens; OOV {100 * result['oov_rate']:.2f}% of a {len(vocab)}-word vocabulary; "
        f"{stats.summary()}"
    )
    if output is not None:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(json.dumps(result, indent=2), encoding="utf-8")
