"""Clustering of uses and the measures on clusterings: affinity propagation, average linkage,
Jensen-Shannon divergence and the adjusted Rand index, on cases whose answers are known."""
import math

import numpy as np
import pytest

from spacy_elmo.usage.clustering import (
    APSettings, adjusted_rand_index, affinity_propagation, average_linkage, cosine_distances, distribution,
    jensen_shannon, standardize,
)


def _blobs(seed=0):
    rng = np.random.default_rng(seed)
    centres = np.array([[0.0, 0.0], [10.0, 0.0], [0.0, 10.0]])
    truth = np.repeat([0, 1, 2], 8)
    return centres[truth] + rng.normal(0, 0.3, (len(truth), 2)), truth


def test_affinity_propagation_finds_three_separated_blobs():
    points, truth = _blobs()
    labels = affinity_propagation(points)
    assert adjusted_rand_index(truth, labels) == 1.0
    assert sorted(set(labels.tolist())) == [0, 1, 2]


def test_affinity_propagation_is_deterministic_and_a_low_preference_gives_fewer_clusters():
    points, _ = _blobs(1)
    assert np.array_equal(affinity_propagation(points), affinity_propagation(points))
    few = affinity_propagation(points, APSettings(preference=-1e3))
    assert len(set(few.tolist())) == 2


# scikit-learn's defaults, which the semeval2020 reference keeps
SKLEARN = dict(damping=0.5, max_iter=200, convergence_iter=15)


def test_a_run_that_does_not_converge_labels_every_point_minus_one():
    points, _ = _blobs(1)
    assert affinity_propagation(points, APSettings(preference=-1e4, **SKLEARN)).tolist() == [-1] * len(points)
    assert affinity_propagation(points, APSettings(max_iter=3)).tolist() == [-1] * len(points)


def _templated_uses(seed, n=200, templates=12, width=64):
    """Two periods of uses of a word in templated text: each use one of a few phrases' vectors, exactly."""
    rng = np.random.default_rng(seed)
    senses = rng.normal(size=(2, width))
    phrases = np.array([senses[i % 2] + rng.normal(size=width) * 0.5 for i in range(templates)])
    periods = []
    for share in (0.8, 0.3):
        first = rng.random(n) < share
        picked = rng.integers(0, templates // 2, n) * 2 + np.where(first, 0, 1)
        periods.append(phrases[picked])
    return standardize(np.vstack(periods))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_default_settings_converge_on_templated_uses_where_scikit_learns_oscillate(seed):
    points = _templated_uses(seed)
    assert (affinity_propagation(points, APSettings(**SKLEARN)) < 0).all()
    labels = affinity_propagation(points)
    assert (labels >= 0).all() and 2 <= labels.max() + 1 <= 12
    assert APSettings() == APSettings(damping=0.9, max_iter=1000, convergence_iter=100)


def test_identical_points_form_one_cluster():
    assert affinity_propagation(np.ones((6, 4))).tolist() == [0] * 6
    assert affinity_propagation(np.ones((1, 4))).tolist() == [0]


def test_affinity_propagation_settings_are_checked():
    with pytest.raises(ValueError, match="damping"):
        APSettings(damping=0.2)


def test_standardize_gives_zero_mean_unit_variance_and_leaves_constant_features_zero():
    out = standardize(np.array([[1.0, 5.0], [3.0, 5.0], [5.0, 5.0]]))
    assert np.allclose(out[:, 0].mean(), 0) and np.allclose(out[:, 0].std(), 1)
    assert np.all(out[:, 1] == 0)


def test_average_linkage_groups_by_direction_not_length():
    vectors = np.array([[1.0, 0.0], [5.0, 0.1], [0.0, 1.0], [0.1, 7.0], [-1.0, -1.0]])
    assert average_linkage(vectors, 3).tolist() == [0, 0, 1, 1, 2]
    assert average_linkage(vectors, 5).tolist() == [0, 1, 2, 3, 4]
    assert average_linkage(vectors, 1).tolist() == [0] * 5


def test_average_linkage_uses_the_mean_distance_between_clusters():
    # a-b merge first (distance 0); c is at cosine distance 1 from a and 0.2929 from b: average 0.646;
    # d is at 0.6 from both a and b (by construction below), so average linkage joins d, single linkage would join c
    a, b = np.array([1.0, 0.0, 0.0]), np.array([1.0, 0.0, 0.0])
    c = np.array([0.0, 1.0, 0.0])
    d = np.array([0.4, 0.0, math.sqrt(1 - 0.16)])
    labels = average_linkage(np.stack([a, b, c, d]), 2)
    assert cosine_distances(d[None], a[None])[0, 0] == pytest.approx(0.6)
    assert labels.tolist() == [0, 0, 1, 0]


def test_jensen_shannon_known_values():
    assert jensen_shannon([0.2, 0.8], [0.2, 0.8]) == 0.0
    assert jensen_shannon([1, 0], [0, 1]) == pytest.approx(math.log(2))
    # m = (0.75, 0.25): (ln(4/3) + (0.5 ln(2/3) + 0.5 ln 2)) / 2
    assert jensen_shannon([1, 0], [0.5, 0.5]) == pytest.approx((math.log(4 / 3) + 0.5 * math.log(2 / 3) + 0.5 * math.log(2)) / 2)
    assert jensen_shannon([2, 2], [1, 1]) == 0.0  # counts are normalized
    with pytest.raises(ValueError):
        jensen_shannon([0, 0], [1, 0])


def test_distribution_counts_shares_of_each_label():
    assert distribution([0, 2, 2, 2], 4).tolist() == [0.25, 0.0, 0.75, 0.0]


def test_adjusted_rand_index_known_values():
    assert adjusted_rand_index([0, 0, 1, 1], [5, 5, 3, 3]) == 1.0  # the same partition, relabelled
    assert adjusted_rand_index([0, 0, 1, 1], [0, 0, 1, 2]) == pytest.approx(4 / 7)  # scikit-learn's documented 0.57
    assert adjusted_rand_index([0, 0, 1, 1], [0, 0, 0, 1]) == pytest.approx(0.0)
    assert adjusted_rand_index(["a", "a", "b"], ["x", "x", "x"]) == pytest.approx(0.0)
    with pytest.raises(ValueError):
        adjusted_rand_index([0, 1], [0])
