"""Spearman's rho and its p-value (scipy's), and the binary decision of SemEval-2020 Task 1's Subtask 1."""
import math

import pytest

from spacy_elmo.usage.ranking import accuracy, aligned, binary_labels, read_gold, spearman


def test_ties_get_their_average_rank():
    # ranks [1, 2.5, 2.5, 4] against [1, 2, 3, 4]: rho = 4.5 / sqrt(4.5 * 5)
    assert spearman([10, 20, 20, 30], [1, 2, 3, 4]).rho == pytest.approx(4.5 / math.sqrt(4.5 * 5), abs=1e-12)


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
    assert spearman([5, 3, 4, 1, 2], gold).p_value == pytest.approx(0.0, abs=1e-12)


def test_the_p_value_is_two_sided_from_students_t_with_n_minus_2_degrees_of_freedom():
    r = spearman([1, 2, 3], [1, 3, 2]).rho  # 0.5
    t1 = r * math.sqrt(1 / (1 - r * r))  # n = 3: dof 1, P(|T| >= t) = 1 - 2 atan(t) / pi
    assert r == pytest.approx(0.5) and spearman([1, 2, 3], [1, 3, 2]).p_value == pytest.approx(1 - 2 * math.atan(t1) / math.pi, abs=1e-12)
    r = spearman([1, 2, 3, 4], [1, 2, 4, 3]).rho  # 0.8
    t2 = r * math.sqrt(2 / (1 - r * r))  # n = 4: dof 2, P(|T| >= t) = 1 - t / sqrt(t^2 + 2)
    assert r == pytest.approx(0.8) and spearman([1, 2, 3, 4], [1, 2, 4, 3]).p_value == pytest.approx(1 - t2 / math.sqrt(t2 * t2 + 2), abs=1e-12)


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
