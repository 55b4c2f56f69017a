"""Semantic change scores: PRT, APD and JSD computed by hand on constructed usage matrices, and
through a tiny biLM on corpora whose change is known."""
import math

import numpy as np
import pytest

from spacy_elmo.usage.change import ChangeSettings, apd, change_scores, cluster_periods, jsd, prt
from spacy_elmo.usage.usages import usage_vectors


def test_prt_is_the_inverse_cosine_of_the_mean_vectors():
    a = np.array([[1.0, 0.0], [1.0, 0.0]])
    b = np.array([[0.0, 1.0], [1.0, 1.0]])  # mean (0.5, 1): cos with (1, 0) = 0.5 / sqrt(1.25)
    assert prt(a, b) == pytest.approx(math.sqrt(1.25) / 0.5)
    assert prt(a, a) == pytest.approx(1.0)


def test_apd_is_the_mean_cosine_distance_over_all_cross_period_pairs():
    a = np.array([[1.0, 0.0]])
    b = np.array([[0.0, 1.0], [1.0, 1.0]])  # distances 1 and 1 - 1/sqrt(2)
    assert apd(a, b) == pytest.approx((1 + 1 - 1 / math.sqrt(2)) / 2)
    assert apd(np.array([[2.0, 0.0]]), np.array([[3.0, 0.0], [1.0, 0.0]])) == pytest.approx(0.0)


def _blob(centre, n, seed):
    return np.asarray(centre) + np.random.default_rng(seed).normal(0, 0.05, (n, len(centre)))


def test_jsd_is_ln2_for_disjoint_senses_and_zero_for_the_same_mix():
    sense_1, sense_2 = [5.0, 0.0], [0.0, 5.0]  # no constant feature: standardizing would blow its noise up
    assert jsd(_blob(sense_1, 10, 0), _blob(sense_2, 10, 1)) == pytest.approx(math.log(2))
    mixed_a = np.vstack([_blob(sense_1, 6, 2), _blob(sense_2, 6, 3)])
    mixed_b = np.vstack([_blob(sense_1, 6, 4), _blob(sense_2, 6, 5)])
    assert jsd(mixed_a, mixed_b) == pytest.approx(0.0, abs=1e-12)
    # a 3:1 mix against 1:3 over the two clusters
    labels = cluster_periods(np.vstack([_blob(sense_1, 6, 6), _blob(sense_2, 2, 7)]),
                             np.vstack([_blob(sense_1, 2, 8), _blob(sense_2, 6, 9)]))
    assert len(set(labels.tolist())) == 2
    expected = 0.5 * (0.75 * math.log(0.75 / 0.5) + 0.25 * math.log(0.25 / 0.5)) * 2
    assert jsd(np.vstack([_blob(sense_1, 6, 6), _blob(sense_2, 2, 7)]),
               np.vstack([_blob(sense_1, 2, 8), _blob(sense_2, 6, 9)])) == pytest.approx(expected)


def test_too_few_uses_give_no_score_and_unknown_metrics_are_refused():
    a, b = _blob([1.0, 0.0], 2, 0), _blob([0.0, 1.0], 5, 1)
    [score] = change_scores({"w": a}, {"w": b}, ["w"], ChangeSettings("apd"))  # min_uses 3
    assert math.isnan(score.score) and (score.uses_a, score.uses_b) == (2, 5)
    [missing] = change_scores({"w": a}, {"w": b}, ["other"], ChangeSettings("prt", min_uses=1))
    assert math.isnan(missing.score) and missing.uses_a == 0
    [scored] = change_scores({"w": a}, {"w": b}, ["w"], ChangeSettings("apd", min_uses=2))
    assert scored.score == pytest.approx(apd(a, b))
    with pytest.raises(ValueError, match="metric"):
        ChangeSettings("cosine")
    with pytest.raises(ValueError, match="width"):
        change_scores({"w": a}, {"w": np.ones((3, 5))}, ["w"], ChangeSettings("apd"))


SAME = ["the bank of the river", "a bank lends money", "the bank was closed"]


def test_a_word_used_in_the_same_contexts_in_both_periods_has_prt_one(tiny_bilm):
    contexts = [(s.split(), s.split().index("bank")) for s in SAME]
    a = usage_vectors(tiny_bilm, contexts, layer=-1)
    b = usage_vectors(tiny_bilm, list(reversed(contexts)), layer=-1)
    [score] = change_scores({"bank": a}, {"bank": b}, ["bank"], ChangeSettings("prt"))
    assert score.score == pytest.approx(1.0, abs=1e-6)


def test_the_same_senses_in_the_same_shares_have_jsd_zero_and_a_lost_sense_does_not():
    """Uses around three well-apart senses (affinity propagation's exemplars are then the same on
    every CPU; exact duplicates would leave it ties that rounding breaks one way or another): the
    same uses in another order give JSD 0, and a sense lost a positive JSD."""
    rng = np.random.default_rng(0)
    senses = rng.normal(size=(3, 8)) * 10
    a = np.concatenate([sense + 0.05 * rng.normal(size=(4, 8)) for sense in senses])
    b = a[rng.permutation(len(a))]
    shifted = np.concatenate([sense + 0.05 * rng.normal(size=(6, 8)) for sense in senses[:2]])  # no third sense
    [same, other] = (change_scores({"w": a}, {"w": x}, ["w"], ChangeSettings("jsd"))[0] for x in (b, shifted))
    assert same.score == pytest.approx(0.0, abs=1e-12)
    assert other.score > 0.05


def test_one_context_repeated_in_both_periods_has_apd_zero_and_a_new_context_raises_it(tiny_bilm):
    same = [("the bank of the river".split(), 1)] * 3
    other = [("a bank lends money".split(), 1)] * 3
    a, b, c = (usage_vectors(tiny_bilm, x, layer="mean") for x in (same, same, other))
    assert apd(a, b) == pytest.approx(0.0, abs=1e-6)
    assert apd(a, c) > 1e-4
    assert jsd(a, b) == 0.0


def test_gold_is_not_scored_against_targets_that_have_no_score():
    from spacy_elmo.usage.change import run_change
    from spacy_elmo.usage.usages import UsageSet, UsageSettings

    settings = UsageSettings(layer="top", match="form", max_uses=10, seed=0)
    few = UsageSet(settings, {"w": []}, {"w": _blob([1.0, 0.0], 2, 0)})
    run = run_change([few, few], ["w", "never"], ChangeSettings("apd"))  # no gold: the scores, nan, are the result
    assert all(math.isnan(s.score) for s in run.scores)
    for gold in ({"graded": {"w": 1.0, "never": 0.0}}, {"binary": {"w": 1.0, "never": 0.0}}):
        with pytest.raises(ValueError, match="no target has a score"):
            run_change([few, few], ["w", "never"], ChangeSettings("apd"), **gold)
