"""Domain transfer as a user runs it: the shipped biLM fine-tuned on raw domain text with the
documented command and its defaults, scored before and after on the domain's held-out text and on
a general one.

    python -m bench.bench_finetune_domain --domain assets/datasets/lm_reuters21578_nltk2008 \\
        --json results/bench/amd-f25-m17/finetune-domain.json [--max-time 4m | --max-steps 400] [--set KEY=VALUE ...]

The domain is Reuters-21578 as the data folder holds it (``derived_reuters_training.txt``: raw
newswire, its lines wrapped, a blank line after each story; research use only, so it is read in
place and nothing of it is written into the record but counts and digests). Its test stories are
split in two: the first ``--dev-stories`` become the held-out text ``finetune`` chooses model-best
on (``--paths.dev``, raw too), stories from ``--test-from`` on the held-out test text that neither
training nor that choice saw. The general text is the one the package ships
(``spacy_elmo/training/general``: UD English EWT test, half of it); ``--wikitext`` adds WikiText-2
test, general text unlike the EWT train text ``finetune`` replays.

The run is ``finetune configs/bilm-small.cfg --paths.train TRAIN --paths.dev DEV`` through the
Python API, with nothing else set unless ``--set`` says (the record lists what was): the recipe,
tokenizer, sentence splitting and vocabulary are the defaults'. Before and after (the start, then
model-best): perplexity with the model's own vocabulary and over the words the start's
vocabulary holds (``ppl_shared``: <UNK> and added words left out), the OOV rate, on the domain
test text (read as ``finetune`` reads raw text) and the general one; and the run's steps, tokens
and tokens/s. On a shared machine the time limit trains fewer steps than it would on an idle one:
``--max-steps`` bounds the run by steps instead, and the record keeps the load average.
"""
import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

import torch

from lab.campaign.gpu_stage import setting_arg
from spacy_elmo.files import write_atomic
from spacy_elmo.records.provenance import data_record, mark_start, model_record, provenance
from spacy_elmo.training.config import load_lm_config
from spacy_elmo.training.corpus import Corpus, split_long
from spacy_elmo.training.finetune import GENERAL_TEXTS, finetune
from spacy_elmo.training.model_dir import load_lm, load_lm_parts
from spacy_elmo.training.perplexity import evaluate_perplexity

from .workloads import bench_command

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "configs" / "bilm-small.cfg"
# the datasets as the probes find them: $SPACY_ELMO_DATA, else the project assets in the checkout
DEFAULT_DATA = Path(os.environ.get("SPACY_ELMO_DATA") or ROOT / "assets" / "datasets")
TRAIN_NAME, TEST_NAME = "derived_reuters_training.txt", "derived_reuters_test.txt"
# the float32 training rate of bilm-small's shape on 2 threads of the idle machine the records name
# (bench_pretrain_step): a run bounded by steps says how long it would train there
IDLE_RATE_RECORD = ROOT / "results" / "bench" / "amd-f25-m17" / "pretrain-step.json"
# what "Done when" in docs/pretraining.md asks of the run
TARGETS = {"general_ratio_max": 1.3, "domain_fall_min": 3.0, "domain_oov_max": 0.05}


def stories(path: Path) -> List[str]:
    """The stories of a derived Reuters file (each followed by a blank line), as they are written."""
    text = path.read_text(encoding="utf-8")
    return [story.strip("\n") for story in text.split("\n\n") if story.strip()]


def held_out(domain: Path, folder: Path, *, dev_stories: int, test_from: int) -> Dict[str, Path]:
    """The domain's dev and test texts, raw (stories kept apart by blank lines), written to ``folder``."""
    test = stories(domain / TEST_NAME)
    if test_from < dev_stories or test_from >= len(test):
        raise SystemExit(f"--test-from must be at least --dev-stories ({dev_stories}) and below {len(test)}")
    paths = {"dev": folder / "domain-dev.txt", "test": folder / "domain-test.txt"}
    paths["dev"].write_text("\n\n".join(test[:dev_stories]) + "\n", encoding="utf-8")
    paths["test"].write_text("\n\n".join(test[test_from:]) + "\n", encoding="utf-8")
    return paths


def scores(lm, vocab, segments, shared: int) -> Dict[str, Any]:
    """Perplexity, perplexity over the start's vocabulary and OOV rate of ``segments``."""
    result = evaluate_perplexity(lm, segments, vocab, shared=shared).to_dict()
    return {key: result[key] for key in ("ppl", "ppl_shared", "oov_rate", "tokens", "tokens_shared")}


def measure(model: Optional[Path], texts: Dict[str, List[List[str]]], shared: int) -> Dict[str, Any]:
    """The start (``model`` None: the shipped biLM) or a fine-tuned model scored on each text."""
    if model is None:
        from spacy_elmo.bilm.softmax import WordSoftmax
        from spacy_elmo.training.lm import LanguageModel

        bilm, vocab, head = load_lm_parts(None)
        lm = LanguageModel(bilm, WordSoftmax.from_weights(head["weight"], head["bias"]))
    else:
        lm, vocab = load_lm(model)
    return {name: scores(lm, vocab, segments, shared) for name, segments in texts.items()}


def run(args: argparse.Namespace, command: str) -> Dict[str, Any]:
    torch.set_num_threads(args.threads)
    loadavg_before = [round(x, 2) for x in os.getloadavg()]
    work = Path(args.work or tempfile.mkdtemp(prefix="bench-finetune-domain-"))
    work.mkdir(parents=True, exist_ok=True)
    data = held_out(args.domain, work, dev_stories=args.dev_stories, test_from=args.test_from)
    train = args.domain / TRAIN_NAME
    overrides = {"paths.train": str(train), "paths.dev": str(data["dev"]), "system.threads": args.threads}
    if args.max_steps:
        overrides["training.max_steps"] = args.max_steps
    overrides.update(dict(setting_arg(text) for text in args.set))
    config = load_lm_config(CONFIG, overrides)
    # the held-out test text as finetune reads raw text: the model's language, the config's [corpus]
    test = Corpus(str(data["test"]), fmt=config.corpus.format, tokenizer=config.corpus.tokenizer, lang="en",
                  sentences=config.corpus.sentences, max_line_chars=config.corpus.max_line_chars)
    texts = {
        "domain_test": list(split_long(test.segments(), config.corpus.max_sentence_tokens))[: args.test_segments or None],
        "general": [line.split() for line in GENERAL_TEXTS["en"].read_text(encoding="utf-8").splitlines()
                    if line.split()][: args.general_segments or None],
    }
    if args.wikitext is not None:  # a second general text, unlike the replayed one (not shipped: read in place)
        lines = [line.split() for line in args.wikitext.read_text(encoding="utf-8").splitlines()
                 if line.split() and not line.strip().startswith("=")]
        texts["wikitext"] = list(split_long(lines, config.corpus.max_sentence_tokens))[: args.test_segments or None]
    shared = len(load_lm_parts(None)[1])
    started = time.monotonic()
    before = measure(None, texts, shared)
    scored_before = time.monotonic() - started
    output = work / "ft"
    log = open(work / "finetune.log", "w", encoding="utf-8")
    result = finetune(config, output, max_time=args.max_time, stream=log)
    log.close()
    after = measure(output / "model-best", texts, shared)
    report = json.loads((output / "finetune-report.json").read_text(encoding="utf-8"))
    summary = result.summary
    general_ratio = after["general"]["ppl_shared"] / before["general"]["ppl_shared"]
    idle = json.loads(IDLE_RATE_RECORD.read_text(encoding="utf-8")) if IDLE_RATE_RECORD.is_file() else None
    idle_rate = next((row["tokens_per_s_median"] for row in (idle or {}).get("rows", [])
                      if row.get("precision") == "fp32" and row.get("threads") == 2), None)
    domain_fall = before["domain_test"]["ppl_shared"] / after["domain_test"]["ppl_shared"]
    record = {
        "domain": {"train": train.name, "test_stories_from": args.test_from, "dev_stories": args.dev_stories,
                   "test_segments": len(texts["domain_test"])},
        "general": GENERAL_TEXTS["en"].name,
        "overrides": {key: value for key, value in overrides.items() if not key.startswith("paths.")},
        "max_time": args.max_time,
        "threads": args.threads,
        "tokenizer": report.get("tokenizer"),
        "recipe": report.get("recipe"),
        "vocabulary": report.get("vocabulary"),
        "steps": summary.steps, "tokens": summary.tokens, "seconds": round(summary.seconds, 1),
        "tokens_per_s": round(summary.tokens_per_second, 1), "stopped_by": summary.stopped_by,
        "model_best_step": (summary.best_dev or {}).get("step"),
        "before": before, "after": after,
        "domain_dev": {"before": report["domain"]["before"], "after": report["domain"]["after"]},
        "general_ratio": round(general_ratio, 4),
        "domain_test_fall": round(domain_fall, 4),
        "wikitext_ratio": (round(after["wikitext"]["ppl_shared"] / before["wikitext"]["ppl_shared"], 4)
                           if "wikitext" in before else None),
        "idle_rate": {"record": str(IDLE_RATE_RECORD.relative_to(ROOT)), "tokens_per_s": idle_rate,
                      "minutes_for_these_tokens": round(summary.tokens / idle_rate / 60, 2) if idle_rate else None},
        "targets": TARGETS,
        "met": {
            "general_ratio": general_ratio <= TARGETS["general_ratio_max"],
            "domain_fall": domain_fall >= TARGETS["domain_fall_min"],
            "domain_oov": after["domain_test"]["oov_rate"] <= TARGETS["domain_oov_max"],
        },
        "scoring_seconds_before": round(scored_before, 1),
        "loadavg_before": loadavg_before,
        "loadavg_after": [round(x, 2) for x in os.getloadavg()],
        "provenance": provenance(
            command, model=model_record(None), model_note="the shipped biLM, the start of the fine-tuning",
            data=data_record([train, args.domain / TEST_NAME, GENERAL_TEXTS["en"], args.wikitext]),
            dirty_note=args.dirty_note,
        ),
    }
    return record


def table(record: Dict[str, Any]) -> str:
    """The record as a Markdown table, before and after."""
    before, after = record["before"], record["after"]
    load = f"load average {record['loadavg_before'][0]:.1f} before, {record['loadavg_after'][0]:.1f} after"
    lines = [f"# Fine-tuning the shipped biLM on raw Reuters text: {record['steps']} steps, {record['tokens']:,} tokens, "
             f"{record['seconds'] / 60:.1f} minutes ({record['tokens_per_s']:.0f} tokens/s, {record['threads']} threads; {load})",
             "", f"`{record['provenance']['command']}`", "",
             "| text | perplexity before | after | over the start's vocabulary before | after | OOV before | after |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for name, label in (("domain_test", "Reuters test (held out)"), ("general", "general (EWT test, half)"),
                        ("wikitext", "WikiText-2 test")):
        if name not in before:
            continue
        b, a = before[name], after[name]
        lines.append(f"| {label} | {b['ppl']:.1f} | {a['ppl']:.1f} | {b['ppl_shared']:.1f} | {a['ppl_shared']:.1f} | "
                     f"{100 * b['oov_rate']:.1f}% | {100 * a['oov_rate']:.1f}% |")
    lines += ["", f"General perplexity after / before (shared vocabulary): {record['general_ratio']:.2f}x; domain test "
              f"perplexity before / after: {record['domain_test_fall']:.2f}x; targets met: {record['met']}."]
    return "\n".join(lines) + "\n"


def parse_args(argv: Optional[List[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--domain", type=Path, default=DEFAULT_DATA / "lm_reuters21578_nltk2008",
                        help="the Reuters folder of the datasets ($SPACY_ELMO_DATA, else assets/datasets)")
    parser.add_argument("--json", type=Path, required=True, help="the record (a .md table is written beside it)")
    parser.add_argument("--max-time", type=float, default=240.0, help="seconds of fine-tuning (finetune's --max-time)")
    parser.add_argument("--max-steps", type=int, default=0, help="bound the run by steps instead (a shared machine)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--dev-stories", type=int, default=300, help="test stories held out for model-best")
    parser.add_argument("--test-from", type=int, default=1500, help="the first test story of the held-out test text")
    parser.add_argument("--test-segments", type=int, default=1000, help="score at most this many test sentences (0: all)")
    parser.add_argument("--wikitext", type=Path, help="WikiText-2 test.txt: a second general text, scored as the others")
    parser.add_argument("--general-segments", type=int, default=0, help="score at most this many general sentences (0: all)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a config setting (repeatable)")
    parser.add_argument("--work", type=Path, help="keep the run here (default: a temporary folder)")
    parser.add_argument("--dirty-note", help="why the checkout had uncommitted changes, where it had")
    args = parser.parse_args(argv)
    if args.max_steps:
        args.max_time = 0.0
    return args


def main(argv: Optional[List[str]] = None) -> Dict[str, Any]:
    args = parse_args(argv)
    command = bench_command("bench.bench_finetune_domain", argv)
    mark_start(command)
    record = run(args, command)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(args.json, (json.dumps(record, indent=2) + "\n").encode("utf-8"))
    write_atomic(args.json.with_suffix(".md"), table(record).encode("utf-8"))
    print(table(record))
    return record


if __name__ == "__main__":
    main(sys.argv[1:])
