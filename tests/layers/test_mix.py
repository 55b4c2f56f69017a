import numpy as np
import pytest
import torch

from spacy_elmo.bilm import ScalarMix
from spacy_elmo.layers.mix import ElmoMix, mix_like


def _layers(seed=0, lengths=(4, 7, 0), n_layers=3, width=5):
    rng = np.random.default_rng(seed)
    return [rng.normal(size=(n_layers, n, width)).astype("float32") for n in lengths]


def _mix(X, weights=(0.3, -0.2, 0.5), gamma=1.7, **settings):
    mix = ElmoMix(**settings)
    mix.initialize(X=X)
    mix.set_param("weights", np.asarray(weights, dtype="float32"))
    mix.set_param("gamma", np.asarray([gamma], dtype="float32"))
    return mix


@pytest.mark.parametrize("layer_norm", [False, True])
def test_mix_and_its_gradients_match_the_torch_scalar_mix(layer_norm):
    X = _layers()
    mix = _mix(X, layer_norm=layer_norm)
    Y, backprop = mix(X, is_train=True)
    rng = np.random.default_rng(1)
    dY = [rng.normal(size=y.shape).astype("float32") for y in Y]
    dX = backprop(dY)

    reference = ScalarMix(3, initial_weights=[0.3, -0.2, 0.5], gamma=1.7, do_layer_norm=layer_norm)
    inputs = [torch.tensor(x, requires_grad=True) for x in X]
    loss = 0.0
    for x, y, dy in zip(inputs, Y, dY):
        expected = reference(x[:, None])[0]  # one Doc = one sentence of the torch mix
        np.testing.assert_allclose(y, expected.detach().numpy(), atol=1e-5)
        loss = loss + (expected * torch.from_numpy(dy)).sum()
    loss.backward()
    for x, d in zip(inputs, dX):
        np.testing.assert_allclose(d, x.grad.numpy(), atol=1e-5)
    np.testing.assert_allclose(mix.get_grad("weights"), reference.scalar_parameters.grad.numpy(), atol=1e-5)
    np.testing.assert_allclose(mix.get_grad("gamma"), reference.gamma.grad.numpy(), atol=1e-4)


def test_initial_mix_is_the_mean_of_the_layers():
    X = _layers()
    mix = ElmoMix()
    mix.initialize(X=X)
    assert mix.get_dim("nL") == 3 and mix.get_dim("nO") == 5
    Y = mix.predict(X)
    np.testing.assert_allclose(Y[0], X[0].mean(axis=0), atol=1e-6)


def test_l2_pulls_the_weights_towards_the_mean():
    X = _layers()
    plain, regularized = _mix(X), _mix(X, l2=0.1)
    for mix in (plain, regularized):
        Y, backprop = mix(X, is_train=True)
        backprop([np.zeros_like(y) for y in Y])
    assert not plain.get_grad("weights").any()
    np.testing.assert_allclose(regularized.get_grad("weights"), 2 * 0.1 * np.array([0.3, -0.2, 0.5]), rtol=1e-5)


def test_layer_dropout_only_in_training():
    X = _layers(lengths=(6,))
    mix = _mix(X, layer_dropout=0.5)
    np.random.seed(0)
    outputs = [mix(X, is_train=True)[0][0] for _ in range(20)]
    full = mix.predict(X)[0]
    # some training passes drop layers, and every training mix is a mix of a subset of the layers
    assert any(not np.allclose(y, full, atol=1e-5) for y in outputs)
    np.testing.assert_allclose(mix.predict(X)[0], full)


def test_output_dropout_only_in_training():
    X = _layers(lengths=(50,))
    mix = _mix(X, dropout=0.5)
    Y = mix(X, is_train=True)[0][0]
    assert (Y == 0).mean() > 0.3
    assert (mix.predict(X)[0] == 0).mean() == 0.0


def test_mix_like_copies_settings_not_weights():
    X = _layers()
    mix = _mix(X, layer_norm=True, dropout=0.2, layer_dropout=0.1, l2=0.01)
    other = mix_like(mix)
    other.initialize(X=X)
    assert {k: other.attrs[k] for k in mix.attrs} == mix.attrs
    assert not other.get_param("weights").any()


def test_wrong_layer_count_and_bad_settings_are_errors():
    mix = ElmoMix()
    mix.initialize(X=_layers())
    with pytest.raises(ValueError, match="3 biLM layers"):
        mix.predict(_layers(n_layers=4))
    with pytest.raises(ValueError, match="dropout"):
        ElmoMix(dropout=1.0)
    with pytest.raises(ValueError, match="l2"):
        ElmoMix(l2=-1.0)
