"""`usages`: every use of target words in a corpus, as per-target ELMo vectors in a Parquet file."""
from pathlib import Path
from typing import Optional

import typer

from ._app import app


@app.command("usages")
def usages_cli(
    corpus: Path = typer.Argument(..., help="text file, one document a line, or a folder of such files"),
    targets: Path = typer.Option(..., "--targets", help="target lemmas or word forms, one a line"),
    output: Path = typer.Option(..., "--output", help="the Parquet file to write"),
    model: Optional[str] = typer.Option(None, "--model", help="any biLM the loader takes (default: the shipped biLM)"),
    layer: str = typer.Option("top", "--layer", help="'top', 'mean' (of all layers) or a layer index (0 = char-CNN)"),
    max_uses: int = typer.Option(1000, "--max-uses", min=1, help="at most this many uses a target (seeded sample)"),
    seed: int = typer.Option(0, "--seed", help="seed of the sample"),
    pipeline: Optional[str] = typer.Option(None, "--pipeline", help="spaCy pipeline with a lemmatizer, to match lemmas (default: a blank one: word forms)"),
    lang: str = typer.Option("en", "--lang", help="language of the blank pipeline"),
    max_tokens: int = typer.Option(400, "--max-tokens", min=1, help="tokens read per line"),
) -> None:
    """Find every use of the targets (lemmas where --pipeline has a lemmatizer, else word forms), keep a
    seeded sample of at most --max-uses each, and write one row per use: target, doc_id (FILE:LINE),
    character offsets, context and the chosen layer's vector."""
    from ..io import load_bilm
    from ..usage.usages import collect_usages, load_tokenizer, read_targets, write_usages

    try:
        wanted = read_targets(targets)
        chosen_layer = layer
        bilm = load_bilm(model)
        found = collect_usages(bilm, corpus, wanted, nlp=load_tokenizer(pipeline, lang=lang), layer=chosen_layer,
                               max_uses=max_uses, seed=seed, max_tokens=max_tokens, model=str(model or "en_small"))
    except (FileNotFoundError, ValueError) as err:
        raise typer.BadParameter(str(err)) from err
    write_usages(found, output)
    typer.echo(f"matched on {'lemmas' if found.settings.match == 'lemma' else 'word forms'}; layer {layer}; "
               f"at most {max_uses} uses a target (seed {seed})")
    for target in wanted:
        typer.echo(f"  {target}\t{len(found.usages[target])} of {found.found[target]} uses")
    typer.echo(f"wrote {output}")
