"""Semantic change and sense induction with known answers, built from the Senseval lexical samples.

    python -m bench.bench_semantic_change --data-dir assets/datasets --seeds 0 1 2 \\
        --json results/en_small/VERSION/semantic-change.json --markdown results/en_small/VERSION/semantic-change.md \\
        --plot results/en_small/VERSION/semantic-change.png

The data are NLTK's Senseval lexical samples (hard, interest, line, serve; ``senseval2_nltk/senseval.zip``
under --data-dir, as the probes find it), each use cut to 16 tokens either side of the target.
For each seed, pseudo-targets are drawn whose two "periods" (30 uses each) have known sense
distributions:

- sense shift: one word, two of its senses (those with at least 300 uses), period A's share of the
  first sense a and period B's b, each uniform in [0, 1];
- pseudo-words: two different words merged into one target, period A's share of the first word a
  and period B's b (each word's uses in its natural sense mix).

Gold change is the Jensen-Shannon divergence (nats) of the two periods' realized distributions
(for a pseudo-word: over the words, which equals that over (word, sense) as the words' own sense
mixes are the same in both periods). PRT, APD and JSD (``spacy_elmo.usage.change``) are ranked
against it with Spearman, per layer and for the mean of the layers, for the shipped biLM and the
same architecture with random weights (torch seed 0), in the same run. Sense induction
(``spacy_elmo.usage.senses``, 3 senses) clusters 15 uses of each of a word's three most frequent
senses and is scored against the Senseval labels with the adjusted Rand index, beside
average-linkage clustering of the top layer's vectors; the random-weights model uses a random
softmax over the same vocabulary. Spread: the standard deviation over seeds.
"""
import argparse
import json
import random
import statistics
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch

from spacy_elmo.files import write_atomic
from spacy_elmo.bilm import BiLM
from spacy_elmo.bilm.softmax import WordSoftmax
from spacy_elmo.io.lm_head import LMHead
from spacy_elmo.io.loading import load_lm_head
from spacy_elmo.records.plots import pyplot
from spacy_elmo.usage.change import ChangeSettings, change_score
from spacy_elmo.usage.clustering import adjusted_rand_index, average_linkage, jensen_shannon
from spacy_elmo.usage.ranking import spearman
from spacy_elmo.usage.senses import SOURCE, SenseSettings, induce_senses
from spacy_elmo.probes.task_data import default_data_dir
from spacy_elmo.probes.wsd import read_sense_uses
from spacy_elmo.records.provenance import data_record, mark_start, model_record, provenance

from .workloads import bench_command

SENSEVAL = Path("senseval2_nltk") / "senseval.zip"
WINDOW = 16
PER_PERIOD = 30
POOL = 120  # uses kept per (word, sense) and per word
MIN_SENSE = 300
METRICS = ("prt", "apd", "jsd")
GROUPS = ("sense shift", "pseudo-word", "all")


def _pools(uses, seed: int) -> Tuple[Dict[Tuple[str, str], list], Dict[str, list]]:
    rng = random.Random(seed)
    by_sense, by_word = defaultdict(list), defaultdict(list)
    for use in uses:
        by_sense[(use.word, use.sense)].append(use.window(WINDOW))
        by_word[use.word].append(use.window(WINDOW))
    senses = {k: rng.sample(v, POOL) for k, v in sorted(by_sense.items()) if len(v) >= MIN_SENSE}
    words = {k: rng.sample(v, POOL) for k, v in sorted(by_word.items())}
    return senses, words


def draw_targets(senses, words, seed: int, *, n_shift: int, n_pseudo: int) -> List[Dict[str, Any]]:
    """Pseudo-targets: each period's uses (two pools, a share from the first) and the gold JSD."""
    rng = random.Random(seed)
    by_word = defaultdict(list)
    for word, sense in senses:
        by_word[word].append(sense)
    targets = []
    for kind, n in (("sense shift", n_shift), ("pseudo-word", n_pseudo)):
        for _ in range(n):
            if kind == "sense shift":
                word = rng.choice(sorted(w for w, s in by_word.items() if len(s) >= 2))
                first, second = rng.sample(sorted(by_word[word]), 2)
                pools, name = (senses[(word, first)], senses[(word, second)]), f"{word}:{first}/{second}"
            else:
                one, two = rng.sample(sorted(words), 2)
                pools, name = (words[one], words[two]), f"{one}+{two}"
            shares = [rng.random(), rng.random()]
            counts = [round(share * PER_PERIOD) for share in shares]
            drawn = [rng.sample(range(POOL), POOL) for _ in pools]  # disjoint uses for the two periods
            periods, cursor = [], [0, 0]
            for k in counts:
                picked = []
                for side, m in ((0, k), (1, PER_PERIOD - k)):
                    picked += [pools[side][i] for i in drawn[side][cursor[side] : cursor[side] + m]]
                    cursor[side] += m
                periods.append(picked)
            gold = jensen_shannon([counts[0], PER_PERIOD - counts[0]], [counts[1], PER_PERIOD - counts[1]])
            targets.append({"name": name, "kind": kind, "shares": counts, "gold": gold, "periods": periods})
    return targets


def embed_pool(bilm: BiLM, uses: Sequence[Any]) -> Dict[Tuple[Tuple[str, ...], int], np.ndarray]:
    """Every layer at each distinct use: (L + 1, width), keyed by (tokens, position)."""
    keys = list(dict.fromkeys((u.tokens, u.position) for u in uses))
    layers = bilm.embed([list(t) for t, _ in keys], batch_size=32)
    return {key: arrays[:, key[1]] for key, arrays in zip(keys, layers)}


def random_model(bilm: BiLM, head: LMHead) -> Tuple[BiLM, LMHead]:
    """The same architecture and vocabulary with random weights (torch seed 0)."""
    torch.manual_seed(0)
    fresh = BiLM(bilm.config).eval()
    softmax = WordSoftmax(len(head.words), bilm.config.projection_dim)
    return fresh, LMHead(softmax, head.words, "random weights")


def score_change(vectors, targets, layers: Sequence[Any]) -> Dict[str, Dict[str, Dict[str, float]]]:
    """Spearman of each metric and layer against gold, per group of targets."""
    result: Dict[str, Dict[str, Dict[str, float]]] = {}
    for layer in layers:
        pick = (lambda v: v.mean(axis=0)) if layer == "mean" else (lambda v, j=layer: v[j])
        for metric in METRICS:
            settings = ChangeSettings(metric)
            scores = [change_score(*(np.stack([pick(vectors[(u.tokens, u.position)]) for u in p]) for p in t["periods"]), settings)
                      for t in targets]
            entry = {}
            for group in GROUPS:
                chosen = [i for i, t in enumerate(targets) if group == "all" or t["kind"] == group]
                entry[group] = spearman([scores[i] for i in chosen], [targets[i]["gold"] for i in chosen]).rho
            result[f"{metric}@{layer}"] = entry
    return result


def score_senses(bilm, head, senses, vectors, seed: int) -> Dict[str, Dict[str, float]]:
    """Adjusted Rand of substitute-based senses and of clustered top-layer vectors, per word."""
    rng = random.Random(seed)
    by_word = defaultdict(list)
    for (word, sense), pool in senses.items():
        by_word[word].append((len(pool), sense, pool))
    found = {}
    for word in sorted(by_word):
        top = sorted(by_word[word], key=lambda x: x[1])[:3]
        uses = [u for _, _, pool in top for u in rng.sample(pool, 15)]
        truth = [u.sense for u in uses]
        contexts = [(u.tokens, u.position) for u in uses]
        inventory = induce_senses(bilm, head, contexts, SenseSettings(n_clusters=len(top)))
        labels = average_linkage(np.stack([vectors[(u.tokens, u.position)][-1] for u in uses]), len(top))
        found[word] = {"substitutes": adjusted_rand_index(truth, inventory.labels), "vectors": adjusted_rand_index(truth, labels)}
    return found


def summarize(values: List[float]) -> Dict[str, Any]:
    """Mean and sd over the seeds with a value. Spearman is undefined (NaN) where fewer than 3 targets
    have a score or the score is constant: layer 0 gives every use of one token the same vector, and
    affinity propagation on such repeated points does not converge (JSD NaN) or splits them at random."""
    values = [v for v in values if v == v]
    if not values:
        return {"mean": None, "sd": None, "n": 0}
    return {"mean": statistics.fmean(values), "sd": statistics.stdev(values) if len(values) > 1 else 0.0, "n": len(values)}


def _cell(entry: Dict[str, Any], seeds: int) -> str:
    if entry["mean"] is None:
        return "undefined (no seed had 3 scored targets and a varying score)"
    return f"{entry['mean']:.3f} ± {entry['sd']:.3f}" + ("" if entry["n"] == seeds else f" (n={entry['n']})")


def main(argv: Optional[List[str]] = None) -> Dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, default=None, help="datasets folder (default: $SPACY_ELMO_DATA, else ./assets/datasets)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--shift-targets", type=int, default=32)
    parser.add_argument("--pseudo-targets", type=int, default=16)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--markdown", type=Path)
    parser.add_argument("--plot", type=Path)
    args = parser.parse_args(argv)
    mark_start(bench_command("bench.bench_semantic_change", argv))
    torch.set_num_threads(args.threads)
    data = (args.data_dir or default_data_dir()) / SENSEVAL
    senses, words = _pools(read_sense_uses(data), 0)
    shipped = load_lm_head(None)
    models = {"shipped": shipped, "random": random_model(*shipped)}
    layers = [*range(shipped[0].config.n_layers + 1), "mean"]
    pool = [u for p in (*senses.values(), *words.values()) for u in p]
    vectors, seconds = {}, defaultdict(float)
    for name, (bilm, _) in models.items():
        start = time.perf_counter()
        vectors[name] = embed_pool(bilm, pool)
        seconds[name] += time.perf_counter() - start
    change: Dict[str, Dict[str, Dict[str, List[float]]]] = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    wsi: Dict[str, Dict[str, Dict[str, List[float]]]] = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    n_targets = {}
    for seed in args.seeds:
        targets = draw_targets(senses, words, seed, n_shift=args.shift_targets, n_pseudo=args.pseudo_targets)
        n_targets[seed] = len(targets)
        order = list(models) if seed % 2 == 0 else list(reversed(models))  # interleaved
        for name in order:
            start = time.perf_counter()
            for key, groups in score_change(vectors[name], targets, layers).items():
                for group, rho in groups.items():
                    change[name][key][group].append(rho)
            for word, scores in score_senses(*models[name], senses, vectors[name], seed).items():
                for method, ari in scores.items():
                    wsi[name][method][word].append(ari)
            seconds[name] += time.perf_counter() - start
    result = {
        "provenance": provenance(model=model_record(None), data=data_record([data]),
                                 model_note="and the same architecture with random weights (torch seed 0), a random softmax"),
        "design": {"per_period": PER_PERIOD, "pool_per_sense": POOL, "min_sense_uses": MIN_SENSE, "window": WINDOW,
                   "seeds": args.seeds, "targets_per_seed": n_targets, "shift_targets": args.shift_targets,
                   "pseudo_targets": args.pseudo_targets, "gold": "JSD (nats) of the periods' realized distributions",
                   "change": {m: ChangeSettings(m).record() for m in METRICS},
                   "senses": {"method": SOURCE, "settings": SenseSettings(n_clusters=3).__dict__, "uses": "15 of each of the word's 3 senses (first by name among those with 300+ uses)",
                              "baseline": "average-linkage cosine clustering of the top layer's vectors into 3"}},
        "spearman": {name: {key: {g: summarize(v) for g, v in groups.items()} for key, groups in keys.items()} for name, keys in change.items()},
        "ari": {name: {method: {w: summarize(v) for w, v in per.items()} for method, per in methods.items()} for name, methods in wsi.items()},
        "seconds": dict(seconds),
    }
    for path, text in ((args.json, json.dumps(result, indent=2) + "\n"), (args.markdown, markdown(result))):
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(path, text.encode("utf-8"))
    if args.plot is not None:
        plot(result, args.plot)
    print(markdown(result))
    return result


def markdown(result: Dict[str, Any]) -> str:
    info = result["provenance"]
    seeds = result["design"]["seeds"]
    lines = [f"# Semantic change and sense induction on Senseval pseudo-targets ({len(seeds)} seeds)", "",
             f"`{info['command']}`", "", f"{info['cpu']}, {info['torch_threads']} torch thread(s), commit {info['commit']}, {info['date']}", "",
             "Spearman of each score against the gold JSD, mean ± sd over seeds:", "",
             "| model | score@layer | " + " | ".join(GROUPS) + " |", "|---|---|" + "---|" * len(GROUPS)]
    for name, keys in result["spearman"].items():
        for key, groups in keys.items():
            lines.append(f"| {name} | {key} | " + " | ".join(_cell(groups[g], len(seeds)) for g in GROUPS) + " |")
    lines += ["", "Sense induction, adjusted Rand index against the Senseval senses, mean ± sd over seeds:", "",
              "| model | method | " + " | ".join(sorted(next(iter(result["ari"].values()))["substitutes"])) + " |",
              "|---|---|" + "---|" * len(next(iter(result["ari"].values()))["substitutes"])]
    for name, methods in result["ari"].items():
        for method, per in methods.items():
            lines.append(f"| {name} | {method} | " + " | ".join(_cell(per[w], len(seeds)) for w in sorted(per)) + " |")
    return "\n".join(lines) + "\n"


def plot(result: Dict[str, Any], path: Path) -> None:
    plt = pyplot(str(path))
    if plt is None:
        return
    keys = list(next(iter(result["spearman"].values())))
    fig, axes = plt.subplots(1, 2, figsize=(12, 4), sharey=True)
    for ax, group in zip(axes, ("sense shift", "pseudo-word")):
        for offset, name in enumerate(result["spearman"]):
            means = [result["spearman"][name][k][group]["mean"] or 0.0 for k in keys]
            sds = [result["spearman"][name][k][group]["sd"] or 0.0 for k in keys]
            ax.bar(np.arange(len(keys)) + 0.4 * offset - 0.2, means, 0.4, yerr=sds, label=name)
        ax.set_xticks(np.arange(len(keys)))
        ax.set_xticklabels(keys, rotation=60, fontsize=7)
        ax.set_title(f"{group}: Spearman vs gold JSD")
        ax.axhline(0, color="black", linewidth=0.5)
    axes[0].legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)


if __name__ == "__main__":
    main()
