import numpy as np
import pytest

from spacy_elmo.probes.sense import _centroids, _leave_one_out, _predict, best_threshold


def test_best_threshold_separates_and_reports_training_accuracy():
    similarities = np.array([0.1, 0.2, 0.8, 0.9, 0.5])
    same = np.array([False, False, True, True, False])
    threshold, score = best_threshold(similarities, same)
    assert 0.5 < threshold < 0.8 and score == 100.0
    assert best_threshold(np.array([0.3, 0.3]), np.array([True, True]))[1] == 100.0


def test_leave_one_out_leaves_each_use_out_of_its_own_sense_vector():
    # two senses of one word; a singleton sense can never be predicted for its only use
    vectors = np.array([[1.0, 0.0], [1.0, 0.1], [0.0, 1.0]])
    labels = np.array([0, 0, 1])
    allowed = np.ones((3, 2), dtype=bool)
    assert _leave_one_out(vectors, labels, allowed, np.array([2 / 3, 1 / 3])) == pytest.approx(100.0 * 2 / 3)


def test_ties_go_to_the_more_frequent_sense():
    # a context-free layer: every use has the same vector, so all sense vectors are equal
    vectors = np.ones((5, 3))
    labels = np.array([1, 1, 1, 0, 0])
    prior = np.array([0.4, 0.6])
    centroids = _centroids(vectors, labels, 2)
    assert (_predict(vectors, centroids, np.ones((5, 2), dtype=bool), prior) == 1).all()
