"""`substitutes`: the words the biLM's own softmax expects at each token of a text, one JSON line per token."""
import json
from typing import Optional

import typer

from ._app import app


@app.command("substitutes")
def substitutes_cli(
    text: str = typer.Argument(..., help="the sentence"),
    model: Optional[str] = typer.Option(
        None, "--model", help="a model with its softmax: our model directory, a folder or zip with a published pair "
        "+ softmax.hdf5 + vocab.txt, or original / original-5.5b (default: the shipped biLM)"
    ),
    top: int = typer.Option(5, "--top", min=1, help="words per list"),
    lang: str = typer.Option("en", "--lang", help="spaCy language whose tokenizer splits the text"),
    exclude_unk: bool = typer.Option(False, "--exclude-unk", help="never offer <UNK> (rare words) as a substitute"),
) -> None:
    """Print, per token, the top words of the forward LM (from the left context), the backward LM
    (from the right context) and both combined (mean of the two log-probabilities), with probabilities."""
    import spacy

    from ..io.lm_head import UNK_TOKEN, load_lm_head
    from ..usage.substitutes import BOUNDARIES, sentence_substitutes

    tokens = [t.text for t in spacy.blank(lang).tokenizer(text) if not t.is_space]
    if not tokens:
        raise typer.BadParameter("the text has no tokens")
    try:
        bilm, head = load_lm_head(model, what="substitutes")
    except ValueError as err:  # a damaged file (ModelFileError) or no softmax
        raise typer.BadParameter(str(err)) from err
    exclude = (*BOUNDARIES, UNK_TOKEN) if exclude_unk else BOUNDARIES
    [found] = sentence_substitutes(bilm, head, [tokens], top=top, exclude=exclude)
    for token in found:
        typer.echo(json.dumps(token.to_dict(), ensure_ascii=False))
