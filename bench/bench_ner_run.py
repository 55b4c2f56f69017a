"""ELMo NER trained as a user runs it, before and after a change of the package: ``spacy train`` with
the shipped NER config on CoNLL-2003 sentences, each run in its own interpreter on the package of
one tree, with what it wrote to disk, its frozen cache's hits per epoch, the torch threads around
loading the trained pipeline, and the entities model-last and model-best predict each loaded alone.

    python -m bench.bench_ner_run --before 26675ff --train-data eng.train --dev-data eng.testa \
        --json results/bench/amd-f25-m17/ner-run.json
    python -m bench.bench_ner_run --shape full --cache-share 0.25 --max-epochs 2 ...   # the cache alone
    python -m bench.bench_ner_run --shape full --threads 0 1 2 --rounds 2 ...           # the thread setting

``--before COMMIT`` runs that commit's package (a git worktree in a temporary folder) and then
this checkout's (or ``--after COMMIT``'s), in turns (``--rounds``); without it only the second. The biLM is the
shipped one, or random weights of a published shape (``--shape full``: AllenNLP's original),
passed as ``--paths.elmo``. ``--cache-share F`` sets ``frozen_cache_mb`` to F times the working
set (the distinct training and dev sentences at the biLM's bytes a token). ``--threads N ...`` runs
each tree once a round for each ``threads`` setting of the elmo model (0: the shipped configs' rule),
labelled ``TREE-threads-N``, and gives each setting's seconds over the fastest's. Bytes written are the
interpreter's own (``/proc/self/io`` write_bytes: what reached the block layer or its page cache).
"""
import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

from spacy.tokens import DocBin
from spacy.vocab import Vocab

from spacy_elmo.downstream.corpus import read_conll_ner, sentences_to_docs
from spacy_elmo.io import save_bilm
from spacy_elmo.records.provenance import data_record, mark_start, model_record, provenance

from .workloads import PUBLISHED_NAMES, REPO, bench_command, published_bilm, write_report

CONFIG = Path("configs") / "ner-elmo.cfg"  # each tree's own

# One run, in a fresh interpreter whose package is the tree on PYTHONPATH: train, then load each model
# alone. Reads its settings as JSON from argv[1], prints its measurements as JSON on the last line.
CHILD = r"""
import json, shutil, sys, time
from pathlib import Path
import spacy, torch
from spacy.training.initialize import init_nlp
from spacy.training.loop import train
from spacy.util import load_config, registry

settings = json.loads(sys.argv[1])
torch.set_num_threads(settings["process_threads"])
per_step = []

@registry.callbacks("bench.frozen_cache_counts.v1")
def counts():
    def before_update(nlp, args):
        cache = nlp.get_pipe("elmo").model.attrs["frozen_cache"]
        per_step.append((args["epoch"], cache.hits, cache.misses))
    return before_update

def written():
    return int(dict(l.split(": ") for l in Path("/proc/self/io").read_text().splitlines())["write_bytes"])

config = load_config(settings["config"], overrides=settings["overrides"], interpolate=False)
config["training"]["before_update"] = {"@callbacks": "bench.frozen_cache_counts.v1"}
output = Path(settings["output"])
output.mkdir(parents=True)
started, bytes_before = time.time(), written()
nlp = init_nlp(config.interpolate())
train(nlp, output, stdout=sys.stderr, stderr=sys.stderr)
wall, bytes_written = time.time() - started, written() - bytes_before
cache = nlp.get_pipe("elmo").model.attrs["frozen_cache"]
per_step.append((per_step[-1][0] + 1, cache.hits, cache.misses))
epochs = {}
for (epoch, hits, misses), (_, next_hits, next_misses) in zip(per_step, per_step[1:]):
    total = epochs.setdefault(epoch, [0, 0])
    total[0] += next_hits - hits
    total[1] += next_misses - misses
del nlp
threads_before = settings["process_threads"]
torch.set_num_threads(threads_before)
texts = settings["texts"]
models = {}
for name in ("model-last", "model-best"):
    alone = output.parent / (output.name + "-" + name)
    shutil.copytree(output / name, alone)
    shutil.rmtree(output / name)
    loaded = spacy.load(alone)
    models[name] = {
        "threads_after_load": torch.get_num_threads(),
        "entities": [[(e.start_char, e.end_char, e.label_) for e in doc.ents] for doc in loaded.pipe(texts)],
        "bytes_on_disk": sum(p.stat().st_size for p in alone.rglob("*") if p.is_file()),
    }
    torch.set_num_threads(threads_before)
import spacy_elmo
print(json.dumps({"package": spacy_elmo.__file__, "seconds": wall, "bytes_written": bytes_written, "threads_before_load": threads_before,
                  "cache_per_epoch": {str(e): {"hits": h, "misses": m} for e, (h, m) in epochs.items()},
                  "cache_bound": cache.max_bytes, "models": models}))
"""


def main(argv: Optional[List[str]] = None) -> Dict[str, Any]:
    args = parse_args(argv)
    mark_start(bench_command("bench.bench_ner_run", argv))
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        train_docs, dev_docs = corpus(args, work)
        bilm_dir = biLM(args.shape, work)
        overrides = run_overrides(args, work, bilm_dir, train_docs + dev_docs)
        texts = [doc.text for doc in dev_docs]
        trees = {label: worktree(commit, work / label) for label, commit in (("before", args.before), ("after", args.after))
                 if commit}
        trees.setdefault("after", REPO)
        trees = {label: trees[label] for label in ("before", "after") if label in trees}
        variants = [(label, tree, {}) for label, tree in trees.items()] if args.threads is None else [
            (f"{label}-threads-{n}", tree, {"components.elmo.model.threads": n}) for label, tree in trees.items()
            for n in args.threads]
        runs: Dict[str, List[Dict[str, Any]]] = {label: [] for label, _, _ in variants}
        load: List[List[float]] = []
        try:
            for round_ in range(args.rounds):
                for label, tree, extra in variants:
                    time.sleep(args.pause)  # the previous run's threads gone from the run queue
                    load.append(list(os.getloadavg()))
                    settings = {"config": str(tree / CONFIG), "overrides": {**overrides, **extra}, "texts": texts,
                                "output": str(work / f"{label}-{round_}"), "process_threads": args.process_threads}
                    runs[label].append(child_run(tree, settings))
        finally:
            for tree in trees.values():
                if tree != REPO:
                    subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(tree)], check=True)
    report = {
        "what": "spacy train with configs/ner-elmo.cfg on CoNLL-2003 sentences, before and after",
        "shape": PUBLISHED_NAMES.get(args.shape, args.shape),
        "before_commit": args.before,
        "after_commit": args.after,
        "train_sentences": args.train_sentences, "dev_sentences": args.dev_sentences,
        "overrides": {k: v for k, v in overrides.items() if not k.startswith("paths.")},
        "runs": runs,
        "load_average": load,
        "summary": summary(runs),
        "provenance": provenance(
            model=model_record() if args.shape == "shipped" else None,
            model_note=None if args.shape == "shipped" else f"random weights (torch seed 0) of the shape {PUBLISHED_NAMES[args.shape]}",
            data=data_record([args.train_data, args.dev_data]),
            data_note=f"the first {args.train_sentences} sentences of the train file and {args.dev_sentences} of the dev file",
        ),
    }
    print(json.dumps(report["summary"], indent=2))
    write_report(report, None, args.json, None)
    return report


def parse_args(argv: Optional[List[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--train-data", type=Path, required=True, help="CoNLL-2003 eng.train (CoNLL NER columns)")
    parser.add_argument("--dev-data", type=Path, required=True, help="CoNLL-2003 eng.testa")
    parser.add_argument("--train-sentences", type=int, default=800)
    parser.add_argument("--dev-sentences", type=int, default=200)
    parser.add_argument("--shape", choices=("shipped", "full", "small"), default="shipped")
    parser.add_argument("--before", help="a commit whose package runs first in each round")
    parser.add_argument("--after", help="a commit whose package runs second in each round (default: this checkout as it is)")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--max-steps", type=int, default=500)
    parser.add_argument("--max-epochs", type=int, default=0)
    parser.add_argument("--eval-frequency", type=int, default=100)
    parser.add_argument("--cache-share", type=float, help="frozen_cache_mb as this share of the working set")
    parser.add_argument("--process-threads", type=int, default=2, help="torch threads the process starts with")
    parser.add_argument("--threads", type=int, nargs="+", help="run each tree with each of these elmo model threads settings")
    parser.add_argument("--pause", type=float, default=5.0, help="seconds to wait before each run")
    parser.add_argument("--json", help="write the record here")
    return parser.parse_args(argv)


def corpus(args: argparse.Namespace, work: Path):
    """Write train.spacy and dev.spacy (ten sentences a Doc, as ``spacy convert -n 10``). RETURNS the Docs."""
    docs = []
    for name, path, n in (("train", args.train_data, args.train_sentences), ("dev", args.dev_data, args.dev_sentences)):
        sentences = list(read_conll_ner(path.read_text(encoding="utf-8")))[:n]
        part = sentences_to_docs(Vocab(), sentences, "ner", n_sents=10)
        DocBin(docs=part, store_user_data=False).to_disk(work / f"{name}.spacy")
        docs.append(part)
    return docs[0], docs[1]


def biLM(shape: str, work: Path) -> Optional[Path]:
    """RETURNS (Optional[Path]): our directory of random weights of a published shape; None: the shipped biLM."""
    if shape == "shipped":
        return None
    return save_bilm(published_bilm(shape, work), work / "bilm")


def run_overrides(args: argparse.Namespace, work: Path, bilm_dir: Optional[Path], docs) -> Dict[str, Any]:
    overrides: Dict[str, Any] = {
        "paths.train": str(work / "train.spacy"), "paths.dev": str(work / "dev.spacy"),
        "training.max_steps": args.max_steps, "training.max_epochs": args.max_epochs,
        "training.eval_frequency": args.eval_frequency,
    }
    if bilm_dir is not None:
        overrides["paths.elmo"] = str(bilm_dir)
    if args.cache_share is not None:
        from spacy_elmo.io.loading import resolve_bilm

        config = resolve_bilm(bilm_dir).config
        distinct = {tuple(t.text for t in sent) for doc in docs for sent in doc.sents}
        working_set = sum(len(s) for s in distinct) * config.n_output_layers * config.output_dim * 4
        overrides["components.elmo.model.frozen_cache_mb"] = args.cache_share * working_set / 2**20
    return overrides


def worktree(commit: str, path: Path) -> Path:
    subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(path), commit], check=True,
                   capture_output=True)
    return path


def child_run(tree: Path, settings: Dict[str, Any]) -> Dict[str, Any]:
    """One run in a fresh interpreter whose ``spacy_elmo`` is the one in ``tree``."""
    env = {**os.environ, "PYTHONPATH": str(tree), "OMP_NUM_THREADS": str(settings["process_threads"])}
    done = subprocess.run([sys.executable, "-c", CHILD, json.dumps(settings)], env=env, cwd=str(tree),
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"the run in {tree} failed:\n{done.stderr[-4000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    package = Path(result.pop("package")).resolve()
    if tree.resolve() not in package.parents:
        raise RuntimeError(f"the run meant for {tree} imported spacy_elmo from {package}")
    for model in result["models"].values():
        entities = model.pop("entities")
        model["entities"] = sum(len(doc) for doc in entities)
        model["entities_sha256"] = hashlib.sha256(json.dumps(entities).encode()).hexdigest()
    return result


def summary(runs: Dict[str, List[Dict[str, Any]]]) -> Dict[str, Any]:
    """Per tree: the mean bytes written and seconds, the second epoch's share of hits, the threads
    after loading, and whether both models predicted the same entities in every run."""
    out: Dict[str, Any] = {}
    for label, tree_runs in runs.items():
        second = [r["cache_per_epoch"].get("1") for r in tree_runs]
        epochs = tree_runs[0]["cache_per_epoch"]
        later = [epochs[e] for e in sorted(epochs, key=int)[1:]]
        out[label] = {
            "bytes_written": sum(r["bytes_written"] for r in tree_runs) / len(tree_runs),
            "seconds": sum(r["seconds"] for r in tree_runs) / len(tree_runs),
            "seconds_range": [min(r["seconds"] for r in tree_runs), max(r["seconds"] for r in tree_runs)],
            "second_epoch_hit_share": [None if s is None else s["hits"] / max(1, s["hits"] + s["misses"]) for s in second],
            "hit_share_per_epoch": [c["hits"] / max(1, c["hits"] + c["misses"]) for _, c in sorted(epochs.items(), key=lambda e: int(e[0]))],
            "hit_share_after_the_first_epoch": sum(c["hits"] for c in later) / max(1, sum(c["hits"] + c["misses"] for c in later)),
            "threads_before_load": tree_runs[0]["threads_before_load"],
            "threads_after_load": {name: m["threads_after_load"] for name, m in tree_runs[0]["models"].items()},
            "entities_sha256": {name: m["entities_sha256"] for name, m in tree_runs[0]["models"].items()},
        }
    fastest = min(entry["seconds"] for entry in out.values())
    for entry in out.values():
        entry["seconds_over_fastest"] = entry["seconds"] / fastest
    if "before" in out and "after" in out:
        out["bytes_written_after_over_before"] = out["after"]["bytes_written"] / out["before"]["bytes_written"]
        out["same_entities"] = out["after"]["entities_sha256"] == out["before"]["entities_sha256"]
    return out


if __name__ == "__main__":
    main()
