"""Training's dropout on the kernel library (fast/dropout.py): torch's distribution and scaling, a mask
that depends on the element and the seed only, the backward through the same mask, and torch's own
dropout wherever the kernel does not run."""
import math

import pytest
import torch

from spacy_elmo.fast import dropout as hashed
from spacy_elmo.fast import kernel_library
from spacy_elmo.training.lm import LanguageModel

from ..conftest import random_bilm

pytestmark = pytest.mark.skipif(kernel_library.compiler() is None, reason="no C++ compiler here")


@pytest.fixture
def kernel():
    if hashed.dropout_op(torch.zeros(1)) is None:
        pytest.fail(f"the compiled library did not build: {kernel_library.status()}")


def _nonzero(shape, dtype=torch.float32, seed=0):
    x = torch.rand(shape, generator=torch.Generator().manual_seed(seed)) + 0.5  # no zeros of its own
    return x.to(dtype)


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_each_element_is_kept_with_probability_one_minus_p_and_scaled_as_torch_scales(kernel, p):
    x = _nonzero((512, 1024))
    torch.manual_seed(0)
    y = hashed.dropout(x, p)
    kept = y != 0
    n = x.numel()
    sigma = math.sqrt(n * p * (1 - p))
    assert abs(kept.sum().item() - n * (1 - p)) < 5 * sigma
    assert torch.equal(y[kept], x[kept] * (1.0 / (1.0 - p)))
    assert x.min() >= 0.5  # the input is left as it was


def test_neighbouring_elements_and_rows_are_dropped_independently(kernel):
    torch.manual_seed(3)
    kept = hashed.dropout(_nonzero((1024, 1024)), 0.5) != 0
    flat = kept.flatten().float()
    n = flat.numel() - 1
    both = (flat[:-1] * flat[1:]).sum().item()
    assert abs(both - n * 0.25) < 5 * math.sqrt(n * 0.25 * 0.75)
    rows = kept.float()
    same_column = (rows[:-1] * rows[1:]).sum().item()
    m = rows[:-1].numel()
    assert abs(same_column - m * 0.25) < 5 * math.sqrt(m * 0.25 * 0.75)


def test_the_mask_depends_on_the_seed_alone_not_on_threads_or_dtype(kernel):
    x = _nonzero((300, 700))
    op = hashed.dropout_op(x)
    masks = []
    for threads, dtype in ((1, torch.float32), (2, torch.float32), (2, torch.bfloat16), (1, torch.bfloat16)):
        torch.set_num_threads(threads)
        xs = x.to(dtype)
        out = torch.empty_like(xs)
        op(xs, out, 12345, hashed.threshold(0.3), 1 / 0.7)
        masks.append(out != 0)
    assert all(torch.equal(masks[0], m) for m in masks[1:])
    other = torch.empty_like(x)
    op(x, other, 12346, hashed.threshold(0.3), 1 / 0.7)
    assert not torch.equal(masks[0], other != 0)


def test_bfloat16_values_are_torchs_rounding_of_the_scaled_value(kernel):
    x = _nonzero((64, 333), torch.bfloat16)
    torch.manual_seed(1)
    y = hashed.dropout(x, 0.2)
    kept = y != 0
    assert y.dtype == torch.bfloat16
    assert torch.equal(y[kept], (x.float()[kept] * float(torch.tensor(1 / 0.8, dtype=torch.float32))).bfloat16())


def test_torch_manual_seed_repeats_a_run_and_each_call_draws_a_new_mask(kernel):
    x = _nonzero((100, 100))
    torch.manual_seed(7)
    first, second = hashed.dropout(x, 0.5), hashed.dropout(x, 0.5)
    torch.manual_seed(7)
    again = hashed.dropout(x, 0.5)
    assert torch.equal(first, again)
    assert not torch.equal(first != 0, second != 0)


def test_the_gradient_goes_through_the_forward_mask_scaled(kernel):
    x = _nonzero((37, 129)).requires_grad_()
    torch.manual_seed(2)
    y = hashed.dropout(x, 0.25)
    upstream = torch.randn(y.shape, generator=torch.Generator().manual_seed(4))
    y.backward(upstream)
    expected = torch.where(y != 0, upstream * (1 / 0.75), torch.zeros(()))
    assert torch.equal(x.grad, expected)


def test_a_strided_input_is_masked_as_its_contiguous_copy(kernel):
    x = _nonzero((50, 80)).t()
    torch.manual_seed(5)
    y = hashed.dropout(x, 0.5)
    torch.manual_seed(5)
    z = hashed.dropout(x.contiguous(), 0.5)
    assert y.shape == x.shape and torch.equal(y, z)


def test_edges_and_other_dtypes_keep_torchs_contract():
    x = _nonzero((10, 10))
    assert torch.equal(hashed.dropout(x, 0.0), x)
    assert torch.equal(hashed.dropout(x, 1.0), torch.zeros_like(x))
    assert torch.equal(hashed.dropout(x, 0.5, training=False), x)
    assert hashed.dropout(torch.empty(0, 4), 0.5).shape == (0, 4)
    with pytest.raises(ValueError, match="between 0 and 1"):
        hashed.dropout(x, 1.5)
    double = hashed.dropout(x.double(), 0.5)  # torch's own: the same contract
    assert double.dtype == torch.float64 and set(torch.unique(double[double != 0] / x.double()[double != 0]).round(decimals=6).tolist()) == {2.0}
    with hashed.torch_dropout():
        assert hashed.dropout_op(x) is None


def test_the_language_model_trains_through_the_kernels_dropout(kernel, monkeypatch):
    """The training model's dropout goes through the kernel, and a step moves every LSTM weight."""
    from spacy_elmo.bilm.softmax import WordSoftmax

    calls = []
    real = hashed._apply
    monkeypatch.setattr(hashed, "_apply", lambda *a: calls.append(a[2]) or real(*a))
    bilm = random_bilm()
    lm = LanguageModel(bilm, WordSoftmax(20, bilm.config.projection_dim), dropout=0.5)
    lm.train()
    ids = torch.randint(1, 200, (2, 5, bilm.config.max_characters_per_token))
    lengths = torch.tensor([5, 3])
    targets = torch.randint(0, 20, (2, 5))
    out = lm(ids, lengths, targets, targets)
    (out["forward_nll"] + out["backward_nll"]).backward()
    layers = 2 * bilm.config.n_layers  # each LSTM layer's input, forward and backward
    assert len(calls) == 2 * (layers + 1)  # and the top layer's output; each again in the backward
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in bilm.forward_lstm.parameters())
