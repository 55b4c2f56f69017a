"""Spearman's rho and its p-value, and the binary decision of SemEval-2020 Task 1's Subtask 1."""
import math

import pytest

from spacy_elmo.usage.ranking import (
    accuracy, aligned, binary_labels, ranks, read_gold, regularized_beta, spearman, t_test_p,
)


def test_ranks_give_ties_their_average_rank():
    assert ranks([10, 20, 20, 30]).tolist() == [1.0, 2.5, 2.5, 4.0]
    assert ranks([3, 1, 2]).tolist() == [3.0, 1.0, 2.0]


def test_spearman_matches_scipys_documented_example():
    # scipy.stats.spearmanr([1, 2, 3, 4, 5], [5, 6, 7, 8, 7]): (0.8207826816681233, 0.08858700531354381)
    found = spearman([1, 2, 3, 4, 5], [5, 6, 7, 8, 7])
    assert found.rho == pytest.approx(0.8207826816681233, abs=1e-12)
    assert found.p_value == pytest.approx(0.08858700531354381, abs=1e-10)
    assert found.n == 5


def test_spearman_of_a_known_ranking_and_its_reverse():
    gold = [0.1, 0.5, 0.2, 0.9, 0.7]
    assert spearman([1, 3, 2, 5, 4], gold).rho == pytest.approx(1.0)
    assert spearman([5, 3, 4, 1, 2], gold).rho == pytest.approx(-1.0)
    assert spearman([5, 3, 4, 1, 2], gold).p_value == 0.0


def test_the_p_value_has_the_closed_forms_of_students_t_with_one_and_two_degrees_of_freedom():
    for r in (0.1, 0.5, 0.9):
        t1 = r * math.sqrt(1 / (1 - r * r))  # n = 3: dof 1, P(|T| >= t) = 1 - 2 atan(t) / pi
        assert t_test_p(r, 3) == pytest.approx(1 - 2 * math.atan(t1) / math.pi, abs=1e-12)
        t2 = r * math.sqrt(2 / (1 - r * r))  # n = 4: dof 2, P(|T| >= t) = 1 - t / sqrt(t^2 + 2)
        assert t_test_p(r, 4) == pytest.approx(1 - t2 / math.sqrt(t2 * t2 + 2), abs=1e-12)
    assert regularized_beta(0.3, 1, 1) == pytest.approx(0.3)  # the uniform distribution's CDF


def test_spearman_leaves_out_targets_without_a_score():
    found = spearman([1, float("nan"), 3, 2], [1, 2, 3, 2])
    assert found.n == 3 and found.rho == pytest.approx(spearman([1, 3, 2], [1, 3, 2]).rho)
    assert math.isnan(spearman([1, 2], [1, 2]).rho)  # too few pairs
    assert math.isnan(spearman([1, 1, 1], [1, 2, 3]).rho)  # a constant side


def test_binary_labels_mark_the_top_43_percent_changed():
    scores = {"a": 0.9, "b": 0.1, "c": 0.5, "d": 0.3, "e": 0.7, "f": float("nan"), "g": 0.2}
    labels = binary_labels(scores)  # int(7 * 0.43) = 3
    assert labels == {"a": 1, "e": 1, "c": 1, "d": 0, "g": 0, "b": 0, "f": 0}
    assert binary_labels(scores, changed_share=0.6)["d"] == 1  # int(7 * 0.6) = 4
    gold = {"a": 1, "b": 0, "c": 0, "d": 1}
    assert accuracy(labels, gold) == 0.5
    with pytest.raises(ValueError):
        binary_labels(scores, changed_share=1.5)


def test_gold_files_are_read_and_aligned_in_their_order(tmp_path):
    path = tmp_path / "graded.txt"
    path.write_text("plane_nn\t0.88\nattack_nn\t0.14\n\n", encoding="utf-8")
    gold = read_gold(path)
    assert gold == {"plane_nn": 0.88, "attack_nn": 0.14}
    scores, values = aligned({"attack_nn": 2.0}, gold)
    assert math.isnan(scores[0]) and scores[1] == 2.0 and values.tolist() == [0.88, 0.14]
    path.write_text("plane_nn 0.88\n", encoding="utf-8")
    with pytest.raises(ValueError, match="line 1"):
        read_gold(path)
    with pytest.raises(FileNotFoundError):
        read_gold(tmp_path / "missing.txt")
