import math

import numpy as np
import pytest
import torch

from spacy_elmo.bilm.softmax import LogUniformSampler, WordSoftmax


def test_sampler_draws_unique_ids_with_log_uniform_frequencies():
    torch.manual_seed(0)
    sampler = LogUniformSampler(1000, 50)
    hits = np.zeros(1000)
    expected = torch.zeros(1000, dtype=torch.float64)
    for _ in range(300):
        ids, tries = sampler.sample()
        assert len(set(ids.tolist())) == 50 and tries >= 50
        assert ids.min() >= 0 and ids.max() < 1000
        hits[ids.numpy()] += 1
        expected += sampler.expected_count(torch.arange(1000), tries)
    # inclusion counts match TF's expected counts for unique sampling: head, middle and tail
    for block in (slice(0, 10), slice(10, 100), slice(100, 1000)):
        assert hits[block].sum() == pytest.approx(float(expected[block].sum()), rel=0.1)
    assert hits[0] > 20 * hits[900:].mean()


def test_sampler_is_replayed_by_the_torch_rng_state():
    sampler = LogUniformSampler(500, 20)
    state = torch.get_rng_state()
    first = sampler.sample()
    torch.set_rng_state(state)
    assert torch.equal(sampler.sample()[0], first[0])


def test_full_nll_is_cross_entropy():
    torch.manual_seed(0)
    head = WordSoftmax(30, 8)
    hidden, targets = torch.randn(5, 8), torch.randint(0, 30, (5,))
    logits = hidden @ head.weight.t() + head.bias
    expected = -torch.log_softmax(logits, -1)[torch.arange(5), targets]
    assert torch.allclose(head.full_nll(hidden, targets), expected, atol=1e-6)


def test_sampled_head_is_exact_in_eval_mode_and_when_vocabulary_is_small():
    torch.manual_seed(0)
    head = WordSoftmax(100, 8, n_samples=10)
    hidden, targets = torch.randn(4, 8), torch.randint(0, 100, (4,))
    assert head.is_sampled
    head.eval()
    # bitwise: in eval mode the head calls full_nll
    assert torch.equal(head(hidden, targets), head.full_nll(hidden, targets))
    head.train()
    assert not torch.allclose(head(hidden, targets), head.full_nll(hidden, targets))
    assert not WordSoftmax(10, 8, n_samples=10).is_sampled


def test_sampled_training_lowers_full_perplexity():
    """Fixed features -> Zipfian targets: training with 16 of 400 classes sampled lowers the exact NLL."""
    torch.manual_seed(0)
    n_classes, dim = 400, 16
    prototypes = torch.randn(n_classes, dim)
    ranks = torch.arange(1, n_classes + 1, dtype=torch.float)
    zipf = (1.0 / ranks) / (1.0 / ranks).sum()
    targets = torch.multinomial(zipf, 2000, replacement=True)
    hidden = prototypes[targets] + 0.3 * torch.randn(2000, dim)
    head = WordSoftmax(n_classes, dim, n_samples=16)
    with torch.no_grad():
        before = float(head.full_nll(hidden, targets).mean())
    optimizer = torch.optim.Adagrad(head.parameters(), lr=0.2, initial_accumulator_value=1.0)
    for step in range(150):
        rows = torch.randint(0, 2000, (128,))
        loss = head(hidden[rows], targets[rows]).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    with torch.no_grad():
        after = float(head.full_nll(hidden, targets).mean())
    assert math.exp(after) < 0.5 * math.exp(before)


def test_accidental_hits_are_not_negatives():
    torch.manual_seed(0)
    head = WordSoftmax(3, 4, n_samples=2)
    hidden = torch.randn(6, 4)
    targets = torch.tensor([0, 1, 2, 0, 1, 2])
    loss = head.sampled_nll(hidden, targets)
    # the true class is always among 2 of 3 candidates often; the loss stays finite and non-negative
    assert torch.isfinite(loss).all() and (loss >= 0).all()


def test_bad_sample_count():
    with pytest.raises(ValueError):
        LogUniformSampler(10, 11)
