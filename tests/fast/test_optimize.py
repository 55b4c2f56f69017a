"""optimize_for_inference: the plain computation's results and state dict, and its argument checks."""
import pytest
import torch

from spacy_elmo.fast import optimize_for_inference

from ..conftest import random_bilm
from ..bilm.sentences import layers


def test_fp32_optimization_keeps_outputs_and_state_dict():
    plain = random_bilm(seed=4)
    fast = optimize_for_inference(random_bilm(seed=4), char_cache_size=100)
    expected, got = layers(plain), layers(fast)
    torch.testing.assert_close(got.layers, expected.layers, atol=1e-5, rtol=0)
    for (name, a), (_, b) in zip(plain.state_dict().items(), fast.state_dict().items()):
        assert torch.equal(a, b), name
    assert fast.forward_lstm.layers[0].state_linearity.weight.t().is_contiguous()
    assert fast.runner is not None and not fast.runner.exact
    assert len(fast.runner.char_cache) > 0
    # exact=True undoes the rounding-level changes: bit-identical to the plain model again
    optimize_for_inference(fast, exact=True)
    assert fast.forward_lstm.layers[0].state_linearity.weight.is_contiguous()
    torch.testing.assert_close(layers(fast).layers, expected.layers, atol=0, rtol=0)


def test_rejects_unknown_precision_and_negative_cache():
    bilm = random_bilm()
    with pytest.raises(ValueError, match="precision"):
        optimize_for_inference(bilm, precision="int4")
    with pytest.raises(ValueError, match="char_cache_size"):
        optimize_for_inference(bilm, char_cache_size=-1)
