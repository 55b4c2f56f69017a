import numpy as np
import pytest
import torch

from spacy_elmo.bilm import ScalarMix
from spacy_elmo.bilm.scalar_mix import select_layer


def test_weights_are_softmax_normalized_and_scaled_by_gamma():
    mix = ScalarMix(3, initial_weights=[0.0, 0.0, 0.0], gamma=2.0)
    layers = torch.stack([torch.full((1, 2, 4), v) for v in (1.0, 2.0, 6.0)])
    assert torch.allclose(mix(layers), torch.full((1, 2, 4), 6.0))


def test_layer_norm_is_per_sentence_not_per_batch():
    torch.manual_seed(0)
    mix = ScalarMix(2, do_layer_norm=True)
    a = torch.randn(2, 1, 5, 4)
    b = torch.randn(2, 1, 5, 4) * 100 + 50
    mask = torch.ones(2, 5, dtype=torch.bool)
    mask[1, 3:] = False
    batch = torch.cat([a, b], dim=1)
    together = mix(batch, mask)
    alone_a = mix(a, mask[:1])
    alone_b = mix(b[:, :, :3], mask[1:, :3])
    assert torch.allclose(together[0], alone_a[0], atol=1e-5)
    assert torch.allclose(together[1, :3], alone_b[0], atol=1e-5)
    assert torch.equal(together[1, 3:], torch.zeros(2, 4))


def test_select_layer_takes_one_layer_or_the_plain_mean_and_refuses_others():
    layers = np.arange(24, dtype=np.float32).reshape(3, 2, 4)
    assert np.array_equal(select_layer(layers, 1), layers[1]) and np.array_equal(select_layer(layers, -1), layers[2])
    assert np.array_equal(select_layer(layers, "mean"), layers.mean(axis=0))
    for wrong in (3, -4, "top"):
        with pytest.raises(ValueError, match="'mean' or an index below 3"):
            select_layer(layers, wrong)
