"""`evaluate`: exact held-out perplexity (forward, backward, geometric mean) of a biLM with its own softmax."""
import json
import resource
from pathlib import Path
from typing import Optional

import typer

from ..bilm.softmax import DEFAULT_CHUNK_SIZE
from ._app import app

# a published model records no segment length: its lines are scored whole
UNCUT = 10**9


@app.command("evaluate")
def evaluate_cli(
    model: Optional[str] = typer.Option(
        None, "--model", help="our model directory (pretrain/finetune output, with vocab.txt and softmax), a folder "
        "or zip holding a published pair with softmax.hdf5 + vocab.txt (or a bilm-tf checkpoint), a bilm-tf "
        "checkpoint, or a published name whose softmax was published (original, original-5.5b); default: the "
        "shipped biLM"
    ),
    data: str = typer.Option(..., "--data", help="held-out text: files, directories, globs (comma-separated)"),
    tokenizer: str = typer.Option("whitespace", "--tokenizer", help="'whitespace' or a spaCy language code"),
    fmt: str = typer.Option("auto", "--format", help="auto, txt, jsonl or spacy"),
    max_sentence_tokens: Optional[int] = typer.Option(
        None, "--max-sentence-tokens", min=1, help="cut longer lines (default: as trained; a published model's are not cut)"
    ),
    max_segments: int = typer.Option(0, "--max-segments", help="score only the first N segments (0: all)"),
    batch_size: int = typer.Option(64, "--batch-size", min=1),
    carry_state: bool = typer.Option(
        False, "--carry-state", help="carry the LSTM state from sentence to sentence, as bilm-tf's test does "
        "(default: a fresh zero state per sentence)"
    ),
    chunk_size: int = typer.Option(
        DEFAULT_CHUNK_SIZE, "--chunk-size", min=1, help="softmax rows normalized at a time (memory: tokens x rows)"
    ),
    output: Optional[Path] = typer.Option(None, "--output", help="also write the numbers as JSON (with the command, commit, CPU and date)"),
) -> None:
    """Exact held-out perplexity of a biLM with its own softmax (forward, backward, geometric mean).

    Every line is scored as a sentence <S> .. </S> with the full softmax (normalized over vocabulary
    chunks, so a published 793,471-word softmax needs no (tokens x words) matrix); words outside the
    softmax's vocabulary count as <UNK> (the OOV rate is reported: perplexities over different
    vocabularies do not compare)."""
    from ..files import file_sha256
    from ..io.loading import locate_bilm
    from ..records.provenance import data_record, model_record, portable_path, provenance
    from ..training.corpus import resolve_paths
    from ..training.head import load_scoring_lm
    from ..training.model_dir import trained_segment_length
    from ..training.perplexity import corpus_perplexity

    try:
        lm, vocab, head = load_scoring_lm(model)
    except ValueError as err:  # a damaged file (ModelFileError) or no softmax to score with
        raise typer.BadParameter(str(err)) from err
    lm.softmax.chunk_size = chunk_size
    if max_sentence_tokens is None:
        trained = locate_bilm(model).training_record()
        max_sentence_tokens = UNCUT if trained is None else trained_segment_length(trained)
    perplexity, stats = corpus_perplexity(
        lm, vocab, data, fmt=fmt, tokenizer=tokenizer, max_sentence_tokens=max_sentence_tokens,
        max_segments=max_segments, batch_size=batch_size, carry_state=carry_state,
    )
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: kilobytes
    result = perplexity.to_dict()
    result.update({
        "model": portable_path(model) if model else "shipped en_small",
        "data": ",".join(portable_path(p.strip()) for p in data.split(",") if p.strip()),
        "state": "carried" if carry_state else "fresh",
        "max_sentence_tokens": None if max_sentence_tokens == UNCUT else max_sentence_tokens,
        "vocab_size": len(vocab), "softmax_chunk_size": chunk_size, "peak_rss_mb": round(peak_mb, 1),
        "head": {portable_path(f): file_sha256(f) for f in head.files},
        "corpus": stats.to_dict(),
        "provenance": provenance(model=model_record(model), data=data_record(resolve_paths(data))),
    })
    typer.echo(
        f"perplexity {result['ppl']:.2f} (forward {result['forward_ppl']:.2f}, backward {result['backward_ppl']:.2f}) "
        f"over {result['tokens']} tokens, {result['state']} state; OOV {100 * result['oov_rate']:.2f}% of a "
        f"{len(vocab)}-word vocabulary; peak RSS {peak_mb:.0f} MB; {stats.summary()}"
    )
    if output is not None:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(json.dumps(result, indent=2), encoding="utf-8")
