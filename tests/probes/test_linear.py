import numpy as np

from spacy_elmo.probes.linear import accuracy, majority_class, train_linear
from spacy_elmo.probes.representations import MEAN, fixed_rows, mix, row_vectors, row_weights, simplex_weights


def _labelled(n: int, seed: int, informative: int, n_layers: int = 3, width: int = 10):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 4, n)
    features = rng.normal(size=(n_layers, n, width)).astype(np.float32)
    features[informative, np.arange(n), labels] += 4.0
    return features, labels


def test_linear_probe_learns_the_informative_layer_and_not_the_noise():
    x, y = _labelled(600, 0, informative=1)
    x_eval, y_eval = _labelled(300, 1, informative=1)
    scores = [accuracy(train_linear(x[k : k + 1], y, 4).predict(x_eval[k : k + 1]), y_eval) for k in range(3)]
    assert scores[1] > 90 and scores[0] < 40 and scores[2] < 40


def test_learned_mix_puts_its_weight_on_the_informative_layer():
    x, y = _labelled(600, 0, informative=2)
    head = train_linear(x, y, 4, learn_mix=True)
    assert head.layer_weights.argmax() == 2 and head.layer_weights[2] > 0.5
    x_eval, y_eval = _labelled(300, 1, informative=2)
    assert accuracy(head.predict(x_eval), y_eval) > 90


def test_linear_probe_is_deterministic_and_survives_constant_features():
    x, y = _labelled(200, 0, informative=0)
    x[:, :, 5] = 3.0  # a dead unit: zero variance
    first, second = train_linear(x[:1], y, 4), train_linear(x[:1], y, 4)
    assert np.array_equal(first.weight.numpy(), second.weight.numpy())
    assert np.isfinite(first.weight.numpy()).all()


def test_majority_class_and_accuracy():
    assert majority_class(np.array([2, 1, 2, 1])) == 1
    assert majority_class(np.array([], dtype=np.int64), default=3) == 3
    assert accuracy(np.array([1, 2]), np.array([1, 3])) == 50.0


def test_rows_and_mix_weights_agree():
    stacked = np.random.default_rng(0).normal(size=(3, 5, 4))
    for row in fixed_rows(3):
        assert np.allclose(mix(stacked, row_weights(row, 3)), row_vectors(stacked, row))
    assert np.allclose(row_vectors(stacked, MEAN), stacked.mean(axis=0))
    grid = list(simplex_weights(3))
    assert len(grid) == 66 and all(abs(sum(w) - 1) < 1e-9 for w in grid)
    assert (0.0, 1.0, 0.0) in grid and len(set(grid)) == 66
