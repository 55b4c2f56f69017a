"""`change`: lexical semantic change of target words between two corpora (PRT, APD or JSD), with
Spearman and binary accuracy against a gold standard."""
import json
from functools import lru_cache, partial
from pathlib import Path
from typing import List, Optional

import typer

from ._app import app
from ._vocabulary import (INPUT, MODEL, OPTIONS, STRICT_UTF8, WEIGHTS, CommandWithOldSpellings, input_files, output_file,
                          report)


@app.command("change", cls=CommandWithOldSpellings)
def change_cli(
    input: List[Path] = typer.Option(
        ..., "--input", help=f"a period, given twice (the first period, then the second): {INPUT}, a `usages` Parquet "
        "file, or an embed-corpus output folder (its stored vectors)",
        callback=input_files,
    ),
    targets: Path = typer.Option(..., "--targets", help="target words, one a line"),
    metric: str = typer.Option("apd", "--metric", help="prt (1 / cos of mean vectors), apd (mean pairwise cosine distance) or jsd (JSD of affinity propagation clusters)"),
    model: Optional[str] = MODEL,
    options: Optional[Path] = OPTIONS,
    weights: Optional[Path] = WEIGHTS,
    layers: str = typer.Option("top", "--layers", help="'top', 'mean' or a layer index"),
    max_uses: int = typer.Option(1000, "--max-uses", min=1, help="at most this many uses a target and period (seeded sample)"),
    seed: int = typer.Option(0, "--seed"),
    min_uses: int = typer.Option(3, "--min-uses", min=1, help="fewer uses in a period: no score (nan)"),
    damping: float = typer.Option(0.9, "--damping", help="jsd: affinity propagation's damping, in [0.5, 1) (Frey & Dueck's 0.9)"),
    max_iter: int = typer.Option(1000, "--max-iter", min=1, help="jsd: affinity propagation's most iterations"),
    preference: Optional[float] = typer.Option(None, "--preference", help="jsd: affinity propagation's preference (default: the median similarity)"),
    pipeline: Optional[str] = typer.Option(None, "--pipeline", help="spaCy pipeline with a lemmatizer, to match lemmas (default: word forms)"),
    lang: str = typer.Option("en", "--lang", help="language of the blank pipeline"),
    gold: Optional[Path] = typer.Option(None, "--gold", help="graded gold, target<TAB>score (SemEval-2020 Task 1 truth/graded.txt): Spearman"),
    binary: Optional[Path] = typer.Option(None, "--binary", help="binary gold, target<TAB>0|1 (truth/binary.txt): accuracy"),
    changed_share: float = typer.Option(0.43, "--changed-share", help="share of targets, top-scored, labelled changed for --binary"),
    strict_utf8: bool = STRICT_UTF8,
    output: List[Path] = typer.Option(
        [], "--output", help="a file to write, once or twice: a name ending in .json gets the record (settings, scores, "
        "evaluation, provenance), any other the TSV (default: the TSV to standard output)", callback=output_file,
    ),
) -> None:
    """Print target<TAB>score<TAB>uses_a<TAB>uses_b<TAB>reason for every target (the reason: why it has no
    score); with --gold, Spearman's rho and its p-value; with --binary, the accuracy of labelling the top
    --changed-share of targets changed. Targets and gold words are matched lower-cased, as the text is."""
    from ..embed.runs import weights_sha256
    from ..io import load_bilm
    from ..io.text_input import TextStats
    from ..records.provenance import data_record, model_record, portable_path, provenance
    from ..usage.usages import load_tokenizer, load_usages_or_collect, read_targets

    # without the usage extra these raise the ImportError that names it (CommandWithOldSpellings prints it)
    from ..usage.change import ChangeSettings, run_change
    from ..usage.clustering import APSettings
    from ..usage.ranking import read_gold

    if len(input) != 2:
        raise typer.BadParameter(f"give the two periods as --input A --input B (got {len(input)})")
    # loaded once, and only where a period is a corpus, not a usages file
    bilm = lru_cache(maxsize=None)(partial(load_bilm, model, options=options, weights=weights))
    try:
        settings = ChangeSettings(metric, min_uses=min_uses, clustering=APSettings(damping=damping, max_iter=max_iter,
                                                                                      preference=preference))
        wanted = read_targets(targets)
        collect = dict(nlp=load_tokenizer(pipeline, lang=lang), layer=layers, max_uses=max_uses, seed=seed,
                       model=str(model or weights or "en_small"), strict_utf8=strict_utf8, stats=TextStats())
        named = (lambda: weights_sha256(bilm())) if model is not None or options is not None else None
        periods = [load_usages_or_collect(period, bilm, wanted, expected_weights=named, **collect) for period in input]
        run = run_change(periods, wanted, settings, graded=read_gold(gold) if gold is not None else None,
                         binary=read_gold(binary) if binary is not None else None, changed_share=changed_share)
    except (FileNotFoundError, ValueError) as err:
        raise typer.BadParameter(str(err)) from err
    report(collect["stats"])
    if not [path for path in output if path.suffix != ".json"]:
        typer.echo(run.tsv(), nl=False)
    typer.echo("\n".join([*(f"warning: {line}" for line in run.warnings()), json.dumps(run.summary(), allow_nan=False)]),
               err=True)
    used = (dict(model=model_record(model, options=options, weights=weights)) if bilm.cache_info().currsize else
            dict(model=None, model_note=f"read from usages files or embed-corpus folders made with {run.usages['model']}"))
    inputs = [p for p in (*input, targets, gold, binary) if p is not None and Path(p).is_file()]
    for path in output:
        path.parent.mkdir(parents=True, exist_ok=True)
        text = (json.dumps(run.record(provenance(**used, data=data_record(inputs)), [portable_path(p) for p in input]),
                           indent=2, ensure_ascii=False, allow_nan=False) + "\n") if path.suffix == ".json" else run.tsv()
        path.write_text(text, encoding="utf-8")
