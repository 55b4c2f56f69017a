"""`senses`: a target's uses in a corpus clustered into senses by the biLM's own substitutes."""
import json
from pathlib import Path
from typing import Optional

import typer

from ._app import app
from ._vocabulary import INPUT, OPTIONS, STRICT_UTF8, WEIGHTS, CommandWithOldSpellings, input_files, output_file, report


@app.command("senses", cls=CommandWithOldSpellings)
def senses_cli(
    input: Path = typer.Option(..., "--input", help=f"the corpus, one document a line: {INPUT}; or an embed-corpus "
                               "output folder (its lines' tokens)", callback=input_files),
    word: str = typer.Option(..., "--word", help="the target (a lemma with a lemmatizing --pipeline, else a word form)"),
    model: Optional[str] = typer.Option(None, "--model", help="a model with its softmax (as `substitutes` takes; default: the shipped biLM)"),
    options: Optional[Path] = OPTIONS,
    weights: Optional[Path] = WEIGHTS,
    n_clusters: int = typer.Option(7, "--senses", min=1, help="senses to induce (SymPatternWSI: 7)"),
    top: int = typer.Option(20, "--top", min=1, help="substitutes per direction and use"),
    no_patterns: bool = typer.Option(False, "--no-patterns", help="predict in the target's own slot, not in 'X and _'"),
    max_uses: int = typer.Option(200, "--max-uses", min=1, help="at most this many uses (seeded sample)"),
    window: int = typer.Option(16, "--window", min=1, help="context tokens kept on each side of the target"),
    seed: int = typer.Option(0, "--seed"),
    examples: int = typer.Option(3, "--examples", min=0, help="example uses shown per sense"),
    pipeline: Optional[str] = typer.Option(None, "--pipeline", help="spaCy pipeline with a lemmatizer, to match lemmas"),
    lang: str = typer.Option("en", "--lang", help="language of the blank pipeline"),
    strict_utf8: bool = STRICT_UTF8,
    output: Optional[Path] = typer.Option(None, "--output", help="also write the senses and each use's sense as JSON",
                                          callback=output_file),
) -> None:
    """Cluster the uses of WORD by their forward and backward LM substitutes (Amrami & Goldberg 2018's
    symmetric-pattern method) and print each sense's top substitutes and example uses."""
    from ..io.loading import load_lm_head
    from ..io.text_input import TextStats
    from ..records.provenance import data_record, model_record, portable_path, provenance
    from ..usage.usages import corpus_lines, find_usages, load_tokenizer

    # without the usage extra these raise the ImportError that names it (CommandWithOldSpellings prints it)
    from ..usage.senses import SOURCE, SenseSettings, induce_senses, senses_record, uses_in_windows

    stats = TextStats()
    try:
        settings = SenseSettings(top=top, patterns=not no_patterns, n_clusters=n_clusters, examples=examples)
        lines = corpus_lines(input, strict_utf8=strict_utf8, stats=stats)
        found = find_usages(load_tokenizer(pipeline, lang=lang), lines, [word], max_uses=max_uses, seed=seed)
        uses, mode = found.uses[word], found.match
        if not uses:
            raise ValueError(f"{input}: no use of {word!r} ({'lemmas' if mode == 'lemma' else 'word forms'} matched)")
        bilm, head = load_lm_head(model, options=options, weights=weights, what="senses")
    except (FileNotFoundError, ValueError) as err:
        raise typer.BadParameter(str(err)) from err
    report(stats)
    inventory = induce_senses(bilm, head, uses_in_windows(uses, window), settings)
    typer.echo(f"{len(uses)} of {found.seen[word]} uses of {word!r} kept ({'lemmas' if mode == 'lemma' else 'word forms'} "
               f"matched; at most {max_uses}, seed {seed}), {len(inventory.senses)} senses, numbered by size; {SOURCE}")
    for sense in inventory.senses:
        typer.echo(f"sense {sense.label} ({sense.size} use{'s' if sense.size != 1 else ''}): "
                   + ", ".join(w for w, _ in sense.substitutes))
        for example in sense.examples:
            typer.echo(f"    {example}")
    if output is not None:
        used = {**settings.__dict__, "window": window, "max_uses": max_uses, "seed": seed}
        record = {"provenance": provenance(model=model_record(model, options=options, weights=weights),
                                           data=data_record([p for p in [input] if p.is_file()]),
                                           **({} if input.is_file() else {"data_note": f"the corpus folder {portable_path(input)}"})),
                  **senses_record(inventory, uses, word=word, match=mode, settings=used, seen=found.seen[word])}
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(json.dumps(record, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
