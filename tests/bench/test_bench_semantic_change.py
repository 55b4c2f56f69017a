"""The semantic-change benchmark's pseudo-targets: periods of known sense shares, gold JSD, and scores
that rank them when the vectors separate the senses."""
import math

import numpy as np

from bench.bench_semantic_change import PER_PERIOD, POOL, draw_targets, score_change
from spacy_elmo.usage.clustering import jensen_shannon
from spacy_elmo.probes.wsd import SenseUse


def _pools():
    senses = {(word, sense): [SenseUse(word, sense, (word, sense, str(i)), 0) for i in range(POOL)]
              for word in ("w1", "w2") for sense in ("s1", "s2")}
    words = {word: senses[(word, "s1")][:60] + senses[(word, "s2")][:60] for word in ("w1", "w2")}
    return senses, words


def test_pseudo_targets_have_the_drawn_shares_disjoint_periods_and_their_gold_jsd():
    senses, words = _pools()
    targets = draw_targets(senses, words, 0, n_shift=6, n_pseudo=3)
    assert [t["kind"] for t in targets] == ["sense shift"] * 6 + ["pseudo-word"] * 3
    for target in targets:
        a, b = target["periods"]
        assert len(a) == len(b) == PER_PERIOD and not set(a) & set(b)
        first = target["name"].split(":")[1].split("/")[0] if target["kind"] == "sense shift" else target["name"].split("+")[0]
        share = [sum(u.sense == first if target["kind"] == "sense shift" else u.word == first for u in p) for p in (a, b)]
        assert share == target["shares"]
        assert target["gold"] == jensen_shannon([share[0], PER_PERIOD - share[0]], [share[1], PER_PERIOD - share[1]])
    assert draw_targets(senses, words, 0, n_shift=6, n_pseudo=3)[0]["periods"] == targets[0]["periods"]


def test_scores_rank_the_targets_when_the_vectors_separate_the_senses():
    senses, words = _pools()
    targets = draw_targets(senses, words, 1, n_shift=12, n_pseudo=0)
    rng = np.random.default_rng(0)
    axis = {"s1": np.array([1.0, 0.0, 0.0]), "s2": np.array([0.0, 1.0, 0.0])}
    vectors = {(u.tokens, u.position): np.stack([axis[u.sense] + rng.normal(0, 0.05, 3)] * 2)
               for pool in senses.values() for u in pool}
    found = score_change(vectors, targets, [1])
    assert found["prt@1"]["sense shift"] > 0.9 and found["jsd@1"]["sense shift"] > 0.8
    assert math.isnan(found["prt@1"]["pseudo-word"])  # no pseudo-words drawn


def test_an_undefined_spearman_is_summarized_and_reported_as_such():
    from bench.bench_semantic_change import markdown, summarize

    assert summarize([float("nan")] * 3) == {"mean": None, "sd": None, "n": 0}
    assert summarize([0.5, float("nan"), 0.7])["n"] == 2
    entry = {g: summarize([float("nan")]) for g in ("sense shift", "pseudo-word", "all")}
    result = {"provenance": {"command": "c", "cpu": "x", "torch_threads": 1, "commit": "0", "date": "d"},
              "design": {"seeds": [0]}, "spearman": {"random": {"prt@0": entry}},
              "ari": {"random": {"substitutes": {"w": summarize([0.25])}}}}
    text = markdown(result)
    assert "undefined (no seed had 3 scored targets and a varying score)" in text and "0.250 ± 0.000" in text
