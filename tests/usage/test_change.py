"""Semantic change scores: PRT, APD and JSD computed by hand on constructed usage matrices, and
through a tiny biLM on corpora whose change is known."""
import json
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


def _strict(text):
    def refuse(constant):
        raise ValueError(f"not strict JSON: {constant}")

    return json.loads(text, parse_constant=refuse)


def _periods(vectors_a, vectors_b):
    from spacy_elmo.usage.usages import UsageSet, UsageSettings

    settings = UsageSettings(layer="top", match="form", max_uses=1000, seed=0)
    return [UsageSet(settings, {t: [] for t in v}, v) for v in (vectors_a, vectors_b)]


def _templated(seed, n=200, templates=12, width=16):
    rng = np.random.default_rng(seed)
    senses = rng.normal(size=(2, width))
    phrases = np.array([senses[i % 2] + rng.normal(size=width) * 0.5 for i in range(templates)])
    return [phrases[rng.integers(0, templates, n)] for _ in range(2)]


def test_each_target_without_a_score_says_why_in_the_table_the_summary_and_the_record():
    from spacy_elmo.usage.change import run_change
    from spacy_elmo.usage.clustering import APSettings

    a, b = _templated(0)
    periods = _periods({"bank": a, "rare": a[:2]}, {"bank": b, "rare": b[:9]})
    oscillating = ChangeSettings("jsd", clustering=APSettings(damping=0.5, max_iter=200, convergence_iter=15))
    run = run_change(periods, ["bank", "rare"], oscillating)
    bank, rare = run.scores
    assert math.isnan(bank.score) and bank.reason.startswith("no convergence") and "damping 0.5" in bank.reason
    assert rare.reason.startswith("too few uses: 2 in the first period and 9 in the second")
    assert "\tno convergence: " in run.tsv().splitlines()[1] and run.tsv().splitlines()[0].endswith("\treason")
    assert set(run.summary()["without_score"]) == {"bank", "rare"}
    record = _strict(json.dumps(run.record({}, ["a", "b"]), allow_nan=False))
    assert record["scores"][0]["score"] is None and record["scores"][1]["reason"].startswith("too few uses")
    # at the defaults the same uses get a score
    [scored, _] = run_change(periods, ["bank", "rare"], ChangeSettings("jsd")).scores
    assert not math.isnan(scored.score) and scored.reason is None


def test_the_gold_error_names_the_real_cause():
    from spacy_elmo.usage.change import run_change
    from spacy_elmo.usage.clustering import APSettings

    a, b = _templated(1)
    periods = _periods({"bank": a, "cell": b}, {"bank": b, "cell": a})
    oscillating = ChangeSettings("jsd", clustering=APSettings(damping=0.5, max_iter=200, convergence_iter=15))
    with pytest.raises(ValueError, match=r"2 targets without a score for no convergence \(the first, 'bank': "
                                         r"no convergence: affinity propagation"):
        run_change(periods, ["bank", "cell"], oscillating, graded={"bank": 1.0, "cell": 0.0})


def test_gold_is_matched_to_the_targets_by_case_and_says_what_it_leaves_out():
    from spacy_elmo.usage.change import run_change

    a, b = _templated(2, n=20)
    periods = _periods({"Cell": a, "bank": a, "tree": a, "rare": a[:1]}, {"Cell": b, "bank": a, "tree": b[::-1], "rare": b})
    run = run_change(periods, ["Cell", "bank", "tree", "rare"], ChangeSettings("apd"),
                     graded={"cell": 0.9, "BANK": 0.0, "rare": 0.5, "ghost": 0.1})
    spearman = run.evaluation["spearman"]
    assert spearman["targets"] == 2 and spearman["without_score"] == 2  # cell and bank scored; rare and ghost not
    warnings = run.evaluation["warnings"]
    assert any("covers 3 of the 4 targets; not in it: tree" in w for w in warnings)
    assert any("1 graded gold word is not a target" in w and "ghost" in w for w in warnings)
    assert any("1 graded gold word has no score: rare (too few uses" in w for w in warnings)
    # two scored targets: rho is undefined, and the record still parses as strict JSON
    record = _strict(json.dumps(run.record({}, []), allow_nan=False))
    assert record["evaluation"]["spearman"]["rho"] is None


def test_gold_words_that_differ_only_in_case_are_refused(tmp_path):
    from spacy_elmo.usage.ranking import read_gold

    gold = tmp_path / "graded.txt"
    gold.write_text("cell\t0.5\nCell\t0.2\n", encoding="utf-8")
    with pytest.raises(ValueError, match="'cell' and 'Cell' differ only in case"):
        read_gold(gold)
