"""`usages`: every use of target words in a corpus, as per-target ELMo vectors in a Parquet file."""
from pathlib import Path
from typing import Optional

import typer

from ._app import app
from ._vocabulary import (INPUT, MODEL, OPTIONS, STRICT_UTF8, WEIGHTS, CommandWithOldSpellings, input_files, output_file,
                          report)


@app.command("usages", cls=CommandWithOldSpellings)
def usages_cli(
    input: Path = typer.Option(..., "--input", help=f"the corpus, one document a line: {INPUT}; or an embed-corpus "
                               "output folder (its stored vectors, no biLM run)", callback=input_files),
    targets: Path = typer.Option(..., "--targets", help="target lemmas or word forms, one a line"),
    output: Path = typer.Option(..., "--output", help="the Parquet file to write", callback=output_file),
    model: Optional[str] = MODEL,
    options: Optional[Path] = OPTIONS,
    weights: Optional[Path] = WEIGHTS,
    layers: str = typer.Option("top", "--layers", help="'top' (the default), 'mean' (of all layers) or a layer index (0 = char-CNN)"),
    max_uses: int = typer.Option(1000, "--max-uses", min=1, help="at most this many uses a target (seeded sample)"),
    seed: int = typer.Option(0, "--seed", help="seed of the sample"),
    pipeline: Optional[str] = typer.Option(None, "--pipeline", help="spaCy pipeline with a lemmatizer, to match lemmas (default: a blank one: word forms)"),
    lang: str = typer.Option("en", "--lang", help="language of the blank pipeline"),
    max_tokens: Optional[int] = typer.Option(None, "--max-tokens", min=1, help="tokens read per line (default: every "
                                             "one; a line runs in windows of 200 tokens, as the elmo component runs it)"),
    strict_utf8: bool = STRICT_UTF8,
) -> None:
    """Find every use of the targets (lemmas where --pipeline has a lemmatizer, else word forms), keep a
    seeded sample of at most --max-uses each, and write one row per use: target, doc_id (FILE:LINE),
    character offsets, context and the chosen layer's vector."""
    from ..embed.runs import weights_sha256
    from ..io.embedded_corpus import is_embedded_folder
    from ..io import load_bilm
    from ..io.text_input import TextStats
    from ..usage.usages import collect_usages, embedded_usages, load_tokenizer, read_targets, write_usages

    stats = TextStats()
    try:
        wanted = read_targets(targets)
        nlp = load_tokenizer(pipeline, lang=lang)
        if is_embedded_folder(input):
            if max_tokens is not None:
                raise ValueError(f"{input}: an embed-corpus folder holds every token of each line, embedded in "
                                 "windows; --max-tokens cuts text as it is read, so give it with a text corpus")
            named = model is not None or options is not None
            found = embedded_usages(input, wanted, nlp=nlp, layer=layers, max_uses=max_uses, seed=seed,
                                    weights_sha256=weights_sha256(load_bilm(model, options=options, weights=weights))
                                    if named else None)
        else:
            bilm = load_bilm(model, options=options, weights=weights)
            found = collect_usages(bilm, input, wanted, nlp=nlp, layer=layers, max_uses=max_uses, seed=seed,
                                   max_tokens=max_tokens, strict_utf8=strict_utf8, stats=stats,
                                   model=str(model or weights or "en_small"))
    except (FileNotFoundError, ValueError) as err:
        raise typer.BadParameter(str(err)) from err
    report(stats)
    write_usages(found, output)
    typer.echo(f"matched on {'lemmas' if found.settings.match == 'lemma' else 'word forms'}; layer {layers}; "
               f"at most {max_uses} uses a target (seed {seed})")
    for target in wanted:
        typer.echo(f"  {target}\t{len(found.usages[target])} of {found.found[target]} uses kept")
    typer.echo(f"wrote {output}")
