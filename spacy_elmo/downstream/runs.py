"""Train each task on each training fraction with and without ELMo, and score it on test.

For every (task, fraction, setting) ``spacy train`` runs CONFIGS/<task config>[-elmo].cfg on
CORPUS/<task>-train-<pct>.spacy (dev: CORPUS/<task>-dev.spacy), then model-best is scored on
CORPUS/<task>-test.spacy (UPOS and NER with gold tokens and sentences, text classification on whole
Docs), and OUTPUT/metrics/<task>-<setting>-<pct>.json records the test score and the dev score that
chose model-best. Cells whose metrics exist are skipped, so an interrupted experiment continues
where it stopped.
"""
import json
import time
from pathlib import Path
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Union

import srsly
from spacy.cli.evaluate import evaluate
from spacy.cli.train import train
from spacy.tokens import DocBin
from spacy.vocab import Vocab

from ..records.provenance import data_record, model_record, portable_path, provenance, start_snapshot
from .lists import comma_list


class Task(NamedTuple):
    config: str  # stem of configs/<config>.cfg and configs/<config>-elmo.cfg
    metric: str  # the score the table reports
    gold_preproc: bool  # score on gold tokens, one example per gold sentence


TASKS = {
    "upos": Task("tagger", "tag_acc", gold_preproc=True),
    "ner": Task("ner", "ents_f", gold_preproc=True),
    # a label belongs to the whole Doc: its sentences are not examples of their own
    "textcat": Task("textcat", "cats_accuracy", gold_preproc=False),
}
SETTINGS = ("plain", "elmo")


def run_one(
    task: str,
    setting: str,
    pct: int,
    *,
    corpus: Path,
    output: Path,
    elmo: Optional[Union[str, Path]],
    overrides: Dict[str, Any],
    configs: Path,
    elmo_cache_mb: Optional[float] = None,
    score_only: bool = False,
) -> Dict[str, Any]:
    """Train and score one cell of the table (score_only: score the model-best an earlier, stopped
    run left, without training). configs (Path): the folder of the task configs. elmo: the biLM of
    the elmo setting, anything load_bilm takes (None: the shipped one).
    RETURNS (Dict): the metrics record written, whose provenance names the commit the cell started
    from, the biLM (the elmo setting) and the .spacy files it read."""
    start = start_snapshot()
    stem, metric, gold_preproc = TASKS[task]
    config = Path(configs) / (f"{stem}-elmo.cfg" if setting == "elmo" else f"{stem}.cfg")
    train_path = corpus / f"{task}-train-{pct}.spacy"
    model_dir = output / "models" / f"{task}-{setting}-{pct}"
    settings = {"paths.train": str(train_path), "paths.dev": str(corpus / f"{task}-dev.spacy"), **overrides}
    if setting == "elmo" and not score_only:
        if elmo is not None:  # else the config's null: the shipped biLM
            settings["paths.elmo"] = str(elmo)
        if elmo_cache_mb is not None:
            settings["components.elmo.model.frozen_cache_mb"] = elmo_cache_mb
    began = time.time()
    if not score_only:
        train(config, model_dir, overrides=settings)
    seconds = None if score_only else round(time.time() - began, 1)
    scores = with_accuracy(evaluate(str(model_dir / "model-best"), corpus / f"{task}-test.spacy", gold_preproc=gold_preproc))
    # the dev scores that chose model-best (spaCy's meta.json): what a setting is chosen on
    dev = with_accuracy(srsly.read_json(model_dir / "model-best" / "meta.json").get("performance", {}))
    docs = list(DocBin().from_disk(train_path).get_docs(Vocab()))
    if setting == "plain":
        bilm: Dict[str, Any] = {"model": None, "model_note": "the plain setting: spaCy's own tok2vec, no biLM"}
    elif score_only:  # the biLM the scored pipeline holds
        bilm = {"model": model_record(model_dir / "model-best"), "model_note": "the elmo component of the scored pipeline"}
    else:
        bilm = {"model": model_record(elmo)}
    read = [train_path, corpus / f"{task}-dev.spacy", corpus / f"{task}-test.spacy"]
    return {
        "task": task,
        "setting": setting,
        "fraction_pct": pct,
        "metric": metric,
        "score": scores[metric],
        "dev_score": dev.get(metric),
        "train_docs": len(docs),
        "train_sentences": sum(len(list(doc.sents)) for doc in docs),
        "train_tokens": sum(len(doc) for doc in docs),
        "train_seconds": seconds,
        "config": str(config.relative_to(Path(configs).parent)),
        "overrides": {} if score_only else {k: portable_path(v) if k.startswith("paths.") else v for k, v in settings.items()},
        "scored_existing_model": score_only,
        "scores": {k: v for k, v in scores.items() if isinstance(v, (int, float))},
        "provenance": provenance(start=start, data=data_record(read), **bilm),
    }


def with_accuracy(scores: Dict[str, Any]) -> Dict[str, Any]:
    """Add "cats_accuracy" where there is "cats_micro_f". With exclusive classes (configs/textcat*.cfg)
    there is one gold and one predicted label per Doc, so each Doc counts once in the micro-averaged
    F1, as a hit or as one false positive plus one false negative: that F1 is the accuracy."""
    return {**scores, "cats_accuracy": scores["cats_micro_f"]} if "cats_micro_f" in scores else scores


def run_cells(
    corpus: Path,
    output: Path,
    *,
    configs: Path,
    elmo: Optional[Union[str, Path]] = None,
    tasks: Union[str, Sequence[str]] = tuple(TASKS),
    fractions: Union[str, Sequence[int]] = (1, 10, 100),
    settings: Union[str, Sequence[str]] = SETTINGS,
    overrides: Optional[Dict[str, Any]] = None,
    elmo_cache_mb: Optional[float] = None,
    score_only: bool = False,
) -> List[str]:
    """Run every (task, fraction, setting) cell whose metrics OUTPUT/metrics/ lacks, printing a line
    for each. tasks, fractions (percent of train) and settings: sequences or comma-separated strings.
    RETURNS (List[str]): the line of each cell run now."""
    tasks, fractions, settings = comma_list(tasks), comma_list(fractions, int), comma_list(settings)
    unknown = [t for t in tasks if t not in TASKS] + [s for s in settings if s not in SETTINGS]
    if unknown:
        raise ValueError(f"unknown tasks or settings {unknown}: tasks are {list(TASKS)}, settings {list(SETTINGS)}")
    metrics_dir = Path(output) / "metrics"
    metrics_dir.mkdir(parents=True, exist_ok=True)
    done: List[str] = []
    for task in tasks:
        for pct in fractions:
            for setting in settings:
                path = metrics_dir / f"{task}-{setting}-{pct}.json"
                if path.exists():
                    print(f"{path} exists: skipped")
                    continue
                record = run_one(
                    task, setting, pct, corpus=Path(corpus), output=Path(output), elmo=elmo,
                    overrides=overrides or {}, configs=configs, elmo_cache_mb=elmo_cache_mb, score_only=score_only,
                )
                path.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
                done.append(f"{task} {setting} {pct}%: {record['metric']} {record['score']:.4f}")
                print(done[-1])
    return done
