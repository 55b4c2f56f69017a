"""The full softmax over vocabulary chunks: the same numbers as the whole matrix, in memory that
does not grow with the vocabulary."""
import subprocess
import sys
import textwrap

import pytest
import torch

from spacy_elmo.bilm.softmax import WordSoftmax

from ..training.conftest import cli_env


def _softmax(n_classes: int, chunk_size: int, seed: int = 0) -> WordSoftmax:
    torch.manual_seed(seed)
    softmax = WordSoftmax(n_classes, 16, chunk_size=chunk_size)
    with torch.no_grad():
        softmax.bias.normal_(0, 1.0)
    return softmax


@pytest.mark.parametrize("chunk_size", [3, 7, 64, 999])
def test_chunked_nll_matches_the_whole_matrix_to_1e_5_relative(chunk_size):
    softmax = _softmax(1000, chunk_size)
    hidden, targets = torch.randn(40, 16) * 2, torch.randint(0, 1000, (40,))
    whole = torch.nn.functional.cross_entropy(hidden @ softmax.weight.t() + softmax.bias, targets, reduction="none")
    with torch.no_grad():
        chunked = softmax.full_nll(hidden, targets)
    torch.testing.assert_close(chunked, whole.detach(), rtol=1e-5, atol=0)


def test_top_log_probs_are_the_brute_force_best_words_of_one_or_two_distributions():
    softmax = _softmax(500, 37)
    forward, backward = torch.randn(12, 16), torch.randn(12, 16)
    log_probs = [torch.log_softmax(h @ softmax.weight.t() + softmax.bias, dim=1).detach() for h in (forward, backward)]
    with torch.no_grad():
        for hidden, expected in (
            (forward[None], log_probs[0]),
            (torch.stack([forward, backward]), (log_probs[0] + log_probs[1]) / 2),
        ):
            expected = expected.clone()
            expected[:, [0, 5, 400]] = float("-inf")
            values, ids = softmax.top_log_probs(hidden, 10, exclude=[0, 5, 400])
            best = expected.topk(10, dim=1)
            assert torch.equal(ids, best.indices)
            torch.testing.assert_close(values, best.values, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="k must be in"):
        softmax.top_log_probs(forward[None], 498, exclude=[0, 5, 400])


PEAK = textwrap.dedent(
    """
    import resource, sys, torch
    from spacy_elmo.bilm.softmax import WordSoftmax
    torch.set_num_threads(1)
    chunk = int(sys.argv[1])
    hidden = torch.randn(1024, 16)
    for n_classes in (10_000, 100_000):
        softmax = WordSoftmax(n_classes, 16, chunk_size=chunk)
        targets = torch.randint(0, n_classes, (1024,))
        with torch.no_grad():
            softmax.full_nll(hidden[:8], targets[:8])
            before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            softmax.full_nll(hidden, targets)
        print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024)
    """
)


def _growth(chunk_size: int):
    done = subprocess.run([sys.executable, "-c", PEAK, str(chunk_size)], capture_output=True, text=True, env=cli_env())
    assert done.returncode == 0, done.stderr
    return [float(line) for line in done.stdout.split()]


def test_peak_memory_of_the_chunked_softmax_does_not_grow_with_the_vocabulary():
    # MB the peak grew by for 10,000 and then 100,000 words (a whole (1024 x 100,000) float32
    # matrix is 410 MB); each measured from the high-water mark the runs before it left
    small, large = _growth(1024)
    assert small < 64 and large < 32, (small, large)
