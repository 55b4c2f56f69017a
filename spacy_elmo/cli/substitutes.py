"""`substitutes`: the words the biLM's own softmax expects at each token of a text, one JSON line per token."""
import json
from pathlib import Path
from typing import Optional

import typer

from ._app import app
from ._vocabulary import OPTIONS, WEIGHTS, CommandWithOldSpellings


@app.command("substitutes", cls=CommandWithOldSpellings)
def substitutes_cli(
    text: str = typer.Argument(..., help="the sentence"),
    model: Optional[str] = typer.Option(
        None, "--model", help="a model with its softmax: our model directory, a folder or zip with a published pair "
        "+ softmax.hdf5 + vocab.txt (or a bilm-tf checkpoint), a bilm-tf checkpoint, or original / original-5.5b "
        "(default: the shipped biLM)"
    ),
    options: Optional[Path] = OPTIONS,
    weights: Optional[Path] = WEIGHTS,
    top: int = typer.Option(5, "--top", min=1, help="words per list"),
    lang: str = typer.Option("en", "--lang", help="spaCy language whose tokenizer splits the text"),
    include_boundaries: bool = typer.Option(
        False, "--include-boundaries", help="offer <S> and </S> too, ranked with the words as bilm-tf's softmax ranks them"
    ),
    all_entries: bool = typer.Option(
        False, "--all-entries", help="offer every vocabulary entry: <UNK> (rare words), <S> and </S> too (default: words only)"
    ),
) -> None:
    """Print, per token, the top words of the forward LM (from the left context), the backward LM
    (from the right context) and both combined (mean of the two log-probabilities), with probabilities."""
    from ..io.lm_head import UNK_TOKEN
    from ..training.corpus import make_tokenizer
    from ..training.scoring import load_lm
    from ..usage.substitutes import NOT_WORDS

    tokens = make_tokenizer(lang)(text)
    if not tokens:
        raise typer.BadParameter("the text has no tokens")
    try:
        lm = load_lm(model, options=options, weights=weights)
    except ValueError as err:  # a damaged file (ModelFileError) or no softmax
        raise typer.BadParameter(str(err)) from err
    exclude = () if all_entries else (UNK_TOKEN,) if include_boundaries else NOT_WORDS
    [found] = lm.substitutes([tokens], top=top, exclude=exclude)
    for token in found:
        typer.echo(json.dumps(token.to_dict(), ensure_ascii=False))
