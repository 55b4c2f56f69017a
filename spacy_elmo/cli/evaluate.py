"""`evaluate`: exact held-out perplexity (forward, backward, geometric mean) of a biLM with its own softmax."""
import json
from pathlib import Path
from typing import Optional

import typer

from ..bilm.softmax import DEFAULT_CHUNK_SIZE
from ._app import app
from ._vocabulary import INPUT, OPTIONS, STRICT_UTF8, WEIGHTS, CommandWithOldSpellings, input_files, output_file


@app.command("evaluate", cls=CommandWithOldSpellings)
def evaluate_cli(
    model: Optional[str] = typer.Option(
        None, "--model", help="our model directory (pretrain/finetune output, with vocab.txt and softmax), a folder "
        "or zip holding a published pair with softmax.hdf5 + vocab.txt (or a bilm-tf checkpoint), a bilm-tf "
        "checkpoint, or a published name whose softmax was published (original, original-5.5b); default: the "
        "shipped biLM"
    ),
    options: Optional[Path] = OPTIONS,
    weights: Optional[Path] = WEIGHTS,
    input: str = typer.Option(..., "--input", help=f"held-out text, one sentence a line: {INPUT}", callback=input_files),
    tokenizer: str = typer.Option(
        "auto", "--tokenizer", help="'auto' (pre-tokenized text split on spaces, as the published figures; raw text by "
        "the spaCy tokenizer of the model's language, or --lang's), 'whitespace', or a spaCy language code"
    ),
    lang: Optional[str] = typer.Option(
        None, "--lang", help="the text's language, for --tokenizer auto (default: the model's, where it records one)"
    ),
    sentences: str = typer.Option(
        "auto", "--sentences", help="how lines become sentences, as [corpus] sentences in training: 'auto' (raw text "
        "wrapped across lines is joined and split by spaCy's sentencizer, as finetune reads it; else each line a "
        "sentence), 'lines', 'sentencizer' or a trained pipeline's name"
    ),
    input_format: str = typer.Option("auto", "--input-format", help="auto (by suffix), txt, jsonl or spacy"),
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
    strict_utf8: bool = STRICT_UTF8,
    output: Optional[Path] = typer.Option(None, "--output", help="also write the numbers as JSON (with the command, commit, CPU and date)",
                                          callback=output_file),
) -> None:
    """Exact held-out perplexity of a biLM with its own softmax (forward, backward, geometric mean).

    Every sentence (a line, or for raw text wrapped across lines each sentence of its joined
    paragraphs, as training reads it) is scored as <S> .. </S> with the full softmax (normalized over vocabulary
    chunks, so a published 793,471-word softmax needs no (tokens x words) matrix); words outside the
    softmax's vocabulary count as <UNK> (the OOV rate is reported: perplexities over different
    vocabularies do not compare). A text wholly outside the vocabulary gets no perplexity; 10% OOV or more, a warning. Raw
    text is tokenized by spaCy (--tokenizer auto), and the line says which tokenizer ran."""
    from ..training.evaluation import evaluate_corpus

    try:
        evaluation = evaluate_corpus(
            input, model=model, options=options, weights=weights, tokenizer=tokenizer, input_format=input_format,
            max_sentence_tokens=max_sentence_tokens, max_segments=max_segments, batch_size=batch_size,
            carry_state=carry_state, chunk_size=chunk_size, strict_utf8=strict_utf8, lang=lang, sentences=sentences,
        )
    except (FileNotFoundError, ValueError) as err:  # a damaged file, no softmax, nothing to score
        raise typer.BadParameter(str(err)) from err
    typer.echo(evaluation.summary())
    for warning in evaluation.warnings:
        typer.secho(warning, fg=typer.colors.YELLOW, err=True)
    if output is not None:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(json.dumps(evaluation.record, indent=2), encoding="utf-8")
