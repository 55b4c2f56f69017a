"""`change`: lexical semantic change of target words between two corpora (PRT, APD or JSD), with
Spearman and binary accuracy against a gold standard."""
import json
import math
from pathlib import Path
from typing import Optional

import typer

from ._app import app


@app.command("change")
def change_cli(
    corpus_a: Path = typer.Argument(..., help="the first period: a corpus (text file or folder) or a `usages` Parquet file"),
    corpus_b: Path = typer.Argument(..., help="the second period, the same way"),
    targets: Path = typer.Option(..., "--targets", help="target words, one a line"),
    metric: str = typer.Option("apd", "--metric", help="prt (1 / cos of mean vectors), apd (mean pairwise cosine distance) or jsd (JSD of affinity propagation clusters)"),
    model: Optional[str] = typer.Option(None, "--model", help="any biLM the loader takes (default: the shipped biLM)"),
    layer: str = typer.Option("top", "--layer", help="'top', 'mean' or a layer index"),
    max_uses: int = typer.Option(1000, "--max-uses", min=1, help="at most this many uses a target and period (seeded sample)"),
    seed: int = typer.Option(0, "--seed"),
    min_uses: int = typer.Option(3, "--min-uses", min=1, help="fewer uses in a period: no score (nan)"),
    damping: float = typer.Option(0.5, "--damping", help="jsd: affinity propagation's damping"),
    preference: Optional[float] = typer.Option(None, "--preference", help="jsd: affinity propagation's preference (default: the median similarity)"),
    pipeline: Optional[str] = typer.Option(None, "--pipeline", help="spaCy pipeline with a lemmatizer, to match lemmas (default: word forms)"),
    lang: str = typer.Option("en", "--lang", help="language of the blank pipeline"),
    gold: Optional[Path] = typer.Option(None, "--gold", help="graded gold, target<TAB>score (SemEval-2020 Task 1 truth/graded.txt): Spearman"),
    binary: Optional[Path] = typer.Option(None, "--binary", help="binary gold, target<TAB>0|1 (truth/binary.txt): accuracy"),
    changed_share: float = typer.Option(0.43, "--changed-share", help="share of targets, top-scored, labelled changed for --binary"),
    output: Optional[Path] = typer.Option(None, "--output", help="write the TSV here (default: standard output)"),
    record: Optional[Path] = typer.Option(None, "--record", help="also write the settings, scores and evaluation as JSON"),
) -> None:
    """Print target<TAB>score<TAB>uses_a<TAB>uses_b for every target; with --gold, Spearman's rho and its
    p-value; with --binary, the accuracy of labelling the top --changed-share of targets changed."""
    from ..io import load_bilm
    from ..records.provenance import data_record, model_record, portable_path, provenance
    from ..usage.usages import load_tokenizer, load_usages_or_collect, read_targets

    try:  # scipy and scikit-learn: the usage extra
        from ..usage.change import ChangeSettings, change_scores, format_score
        from ..usage.clustering import APSettings
        from ..usage.ranking import accuracy, aligned, binary_labels, read_gold, spearman
    except ImportError as err:
        typer.echo(str(err), err=True)
        raise typer.Exit(1) from None

    loaded = {}

    def bilm():
        if "bilm" not in loaded:
            loaded["bilm"] = load_bilm(model)
        return loaded["bilm"]

    try:
        settings = ChangeSettings(metric, min_uses=min_uses, clustering=APSettings(damping=damping, preference=preference))
        wanted = read_targets(targets)
        nlp = load_tokenizer(pipeline, lang=lang)
        options = dict(nlp=nlp, layer=layer, max_uses=max_uses, seed=seed, model=str(model or "en_small"))
        periods = [load_usages_or_collect(c, bilm, wanted, **options) for c in (corpus_a, corpus_b)]
        graded = read_gold(gold) if gold is not None else None
        binary_gold = read_gold(binary) if binary is not None else None
    except (FileNotFoundError, ValueError) as err:
        raise typer.BadParameter(str(err)) from err
    first, second = (p.settings for p in periods)
    if (first.layer, first.model, first.match) != (second.layer, second.model, second.match):
        raise typer.BadParameter(f"the periods' usages differ: layer {first.layer} / {second.layer}, model "
                                 f"{first.model} / {second.model}, match {first.match} / {second.match}")
    scores = change_scores(periods[0].vectors, periods[1].vectors, wanted, settings)
    lines = ["target\tscore\tuses_a\tuses_b"] + [f"{s.target}\t{format_score(s.score)}\t{s.uses_a}\t{s.uses_b}" for s in scores]
    if output is not None:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text("\n".join(lines) + "\n", encoding="utf-8")
    else:
        typer.echo("\n".join(lines))
    by_target = {s.target: s.score for s in scores}
    described = {"change": settings.record(), "usages": {"layer": first.layer, "match": first.match, "max_uses": first.max_uses,
                                                        "seed": first.seed, "max_tokens": first.max_tokens, "model": first.model}}
    evaluation = {}
    if graded is not None:
        correlation = spearman(*aligned(by_target, graded))
        evaluation["spearman"] = {"rho": correlation.rho, "p_value": correlation.p_value, "targets": correlation.n,
                                  "without_score": len(graded) - correlation.n}
    if binary_gold is not None:
        labels = binary_labels({t: by_target.get(t, math.nan) for t in binary_gold}, changed_share=changed_share)
        evaluation["binary"] = {"accuracy": accuracy(labels, binary_gold), "changed_share": changed_share,
                                "rule": "top int(n * changed_share) by score labelled 1 (akutuzov/semeval2020 ling_features/helpers.py)"}
    typer.echo(json.dumps({**described, **evaluation}), err=True)
    if record is not None:
        inputs = [p for p in (corpus_a, corpus_b, targets, gold, binary) if p is not None and Path(p).is_file()]
        used = (dict(model=model_record(model)) if "bilm" in loaded else
                dict(model=None, model_note=f"read from usages files collected with {first.model}"))
        result = {"provenance": provenance(**used, data=data_record(inputs)),
                  **described, "evaluation": evaluation, "corpora": [portable_path(corpus_a), portable_path(corpus_b)],
                  "scores": [{"target": s.target, "score": None if math.isnan(s.score) else s.score,
                              "uses_a": s.uses_a, "uses_b": s.uses_b} for s in scores]}
        record.parent.mkdir(parents=True, exist_ok=True)
        record.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
