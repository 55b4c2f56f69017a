import math

import numpy as np
import pytest
import torch

from spacy_elmo.bilm.softmax import LogUniformSampler, WordSoftmax, accidental_hits


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


def _masked_cross_entropy(head, hidden, targets):
    """The sampled loss as written out plainly: every logit, hits masked, the true class first."""
    candidates, tries = head.sampler.sample()
    log_q_true = torch.log(head.sampler.expected_count(targets, tries)).float()
    log_q_sampled = torch.log(head.sampler.expected_count(candidates, tries)).float()
    true_logits = (hidden * head.weight[targets]).sum(-1) + head.bias[targets] - log_q_true
    sampled = hidden @ head.weight[candidates].t() + head.bias[candidates] - log_q_sampled
    sampled = sampled.masked_fill(candidates[None, :] == targets[:, None], float("-inf"))
    logits = torch.cat([true_logits[:, None], sampled], dim=1)
    return torch.nn.functional.cross_entropy(logits, torch.zeros(len(targets), dtype=torch.long), reduction="none")


def test_sampled_nll_and_its_gradients_equal_the_masked_cross_entropy():
    torch.manual_seed(0)
    head = WordSoftmax(60, 8, n_samples=40)  # most targets are hits
    hidden = torch.randn(50, 8, requires_grad=True)
    targets = torch.randint(0, 60, (50,))
    results = []
    for loss_of in (head.sampled_nll, lambda h, t: _masked_cross_entropy(head, h, t)):
        torch.manual_seed(7)  # the same candidates
        hidden.grad = None
        head.zero_grad()
        loss = loss_of(hidden, targets)
        (loss * torch.linspace(0.5, 1.5, 50)).sum().backward()
        results.append((loss.detach(), hidden.grad.clone(), head.weight.grad.clone(), head.bias.grad.clone()))
    torch.manual_seed(7)
    candidates, _ = head.sampler.sample()
    assert 10 < int((candidates[None, :] == targets[:, None]).sum()) < 50  # hits, not in every row
    for got, want in zip(*results):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


def test_accidental_hits_finds_each_target_among_the_candidates():
    candidates = torch.tensor([5, 2, 9])
    rows, columns = accidental_hits(candidates, torch.tensor([2, 3, 9, 2, 0]), 10)
    assert rows.tolist() == [0, 2, 3] and columns.tolist() == [1, 2, 1]


def test_bad_sample_count():
    with pytest.raises(ValueError):
        LogUniformSampler(10, 11)


def test_row_logsumexp_and_its_gradient_equal_torchs():
    from spacy_elmo.bilm.softmax import RowLogSumExp

    x = torch.randn(7, 9, dtype=torch.float64)
    x[2, 3] = float("-inf")
    x[5] = float("-inf")  # a row with nothing to sum
    weights = torch.randn(7, dtype=torch.float64)
    ours, theirs = x.clone().requires_grad_(), x.clone().requires_grad_()
    got, want = RowLogSumExp.apply(ours), torch.logsumexp(theirs, dim=1)
    assert torch.equal(torch.isinf(got), torch.isinf(want))
    torch.testing.assert_close(got[torch.isfinite(want)], want[torch.isfinite(want)])
    (got[:5] * weights[:5]).sum().backward(retain_graph=True)
    (want[:5] * weights[:5]).sum().backward()
    torch.testing.assert_close(ours.grad[:5], theirs.grad[:5])
    assert ours.grad[2, 3] == 0 and torch.equal(ours.grad[5:], torch.zeros(2, 9, dtype=torch.float64))
    with pytest.raises(RuntimeError, match="twice"):
        (got[:5] * weights[:5]).sum().backward()
