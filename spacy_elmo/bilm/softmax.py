"""The word softmax shared by both directions of the biLM (training, scoring, substitutes).

Two heads with the same parameters (``weight`` (V, P), ``bias`` (V,)): the full
softmax, exact and used for every evaluation, and the sampled softmax (Jean et
al. 2015) with TensorFlow's log-uniform candidate sampler, as the published
models were trained: unique candidates, true-class and sampled logits corrected
by the log of their expected counts, accidental hits removed. The full softmax of
a large vocabulary (the published 793,471 words) is computed over chunks of rows:
its normalizer accumulated by log-sum-exp, its best words merged chunk by chunk.
"""
import math
from typing import Sequence, Tuple

import torch
from torch import nn
from torch.autograd.function import once_differentiable

from .token_encoder import take_rows

# vocabulary rows per chunk of the full softmax: 8,192 rows x 4,096 tokens of float32 logits is 128 MiB
DEFAULT_CHUNK_SIZE = 8192


class LogUniformSampler:
    """Draw unique word ids from P(k) = log((k + 2) / (k + 1)) / log(V + 1).

    The vocabulary must be sorted by decreasing frequency for this Zipfian
    proposal to be a good one. Random numbers come from torch's global
    generator, so a saved and restored RNG state replays the same samples.

    n_classes (int): vocabulary size V.
    n_samples (int): unique candidates per draw (at most V).
    """

    def __init__(self, n_classes: int, n_samples: int) -> None:
        if not 0 < n_samples <= n_classes:
            raise ValueError(f"n_samples must be in [1, {n_classes}], not {n_samples}")
        self.n_classes = n_classes
        self.n_samples = n_samples
        self._log_range = math.log(n_classes + 1)

    def probability(self, ids: torch.Tensor) -> torch.Tensor:
        ids = ids.to(torch.float64)
        return (torch.log(ids + 2.0) - torch.log(ids + 1.0)) / self._log_range

    def expected_count(self, ids: torch.Tensor, n_tries: int) -> torch.Tensor:
        """Expected number of times each id appears in ``n_tries`` draws (unique sampling, as TF)."""
        return -torch.expm1(n_tries * torch.log1p(-self.probability(ids)))

    def sample(self) -> Tuple[torch.Tensor, int]:
        """RETURNS (Tuple[LongTensor, int]): ``n_samples`` distinct ids and the number of draws it took."""
        draws = torch.empty(0, dtype=torch.long)
        chunk = max(2 * self.n_samples, 64)
        while True:
            uniform = torch.rand(chunk, dtype=torch.float64)
            new = (torch.exp(uniform * self._log_range).floor().long() - 1).clamp_(0, self.n_classes - 1)
            draws = torch.cat([draws, new])
            _, inverse = torch.unique(draws, return_inverse=True)
            # position of each id's first draw, in draw order
            first = torch.full((int(inverse.max()) + 1,), len(draws), dtype=torch.long)
            first = first.scatter_reduce(0, inverse, torch.arange(len(draws)), reduce="amin")
            first = first.sort().values
            if len(first) >= self.n_samples:
                positions = first[: self.n_samples]
                return draws[positions], int(positions[-1]) + 1


class WordSoftmax(nn.Module):
    """Softmax over a word vocabulary: full (exact) or sampled (training of large vocabularies).

    n_classes (int): vocabulary size.
    dim (int): width of the hidden states (the biLM's projection_dim).
    n_samples (int): candidates of the sampled softmax; 0 (or >= n_classes) trains with the full softmax.
    chunk_size (int): the most vocabulary rows whose logits exist at once in the full softmax;
        a larger vocabulary is normalized chunk by chunk (``log_normalizer``).
    """

    def __init__(self, n_classes: int, dim: int, *, n_samples: int = 0, chunk_size: int = DEFAULT_CHUNK_SIZE) -> None:
        super().__init__()
        if chunk_size < 1:
            raise ValueError(f"chunk_size must be at least 1, not {chunk_size}")
        self.n_classes = n_classes
        self.chunk_size = chunk_size
        self.weight = nn.Parameter(torch.empty(n_classes, dim))
        self.bias = nn.Parameter(torch.zeros(n_classes))
        # bilm-tf's initialization of the softmax weights
        nn.init.normal_(self.weight, std=1.0 / math.sqrt(dim))
        sampled = 0 < n_samples < n_classes
        self.sampler = LogUniformSampler(n_classes, n_samples) if sampled else None

    @classmethod
    def from_weights(
        cls, weight: torch.Tensor, bias: torch.Tensor, *, n_samples: int = 0, chunk_size: int = DEFAULT_CHUNK_SIZE
    ) -> "WordSoftmax":
        """A head holding these tensors (not copied; no random weights are drawn first, which for
        a published 793,471-row head would take seconds and 1.6 GB).

        weight (Tensor): (V, P). bias (Tensor): (V,).
        RETURNS (WordSoftmax): the head.
        """
        softmax = cls(0, weight.shape[1], chunk_size=chunk_size)
        softmax.n_classes = weight.shape[0]
        softmax.weight = nn.Parameter(weight)
        softmax.bias = nn.Parameter(bias)
        if 0 < n_samples < softmax.n_classes:
            softmax.sampler = LogUniformSampler(softmax.n_classes, n_samples)
        return softmax

    @property
    def is_sampled(self) -> bool:
        return self.sampler is not None

    def full_nll(self, hidden: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Exact negative log-likelihood of each target. hidden (N, P), targets (N,). RETURNS (N,).

        A vocabulary larger than ``chunk_size`` is normalized chunk by chunk (``log_normalizer``),
        so no (N, V) matrix exists: the published 793,471-word softmax in bounded memory.
        """
        if self.n_classes <= self.chunk_size:
            logits = hidden @ self.weight.t() + self.bias
            return nn.functional.cross_entropy(logits.float(), targets, reduction="none")
        return self.log_normalizer(hidden) - self.target_logits(hidden, targets)

    def target_logits(self, hidden: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """The logit of each target alone. hidden (N, P), targets (N,). RETURNS (N,) float32."""
        return ((hidden * take_rows(self.weight, targets)).sum(-1) + take_rows(self.bias, targets)).float()

    def log_normalizer(self, hidden: torch.Tensor) -> torch.Tensor:
        """``logsumexp`` of every word's logit, accumulated over vocabulary chunks of ``chunk_size``
        rows: memory (N, chunk_size), whatever the vocabulary. hidden (N, P). RETURNS (N,) float32."""
        total = torch.full((hidden.shape[0],), float("-inf"), dtype=torch.float32, device=hidden.device)
        for start in range(0, self.n_classes, self.chunk_size):
            rows = slice(start, start + self.chunk_size)
            logits = torch.addmm(self.bias[rows], hidden, self.weight[rows].t()).float()
            total = torch.logaddexp(total, torch.logsumexp(logits, dim=1))
        return total

    def top_log_probs(
        self, hidden: torch.Tensor, k: int, *, exclude: Sequence[int] = ()
    ) -> Tuple[torch.Tensor, torch.Tensor]:
        """The ``k`` words of highest mean log-probability over D distributions, chunk by chunk.

        hidden (Tensor): (D, N, P) states (D = 1: one direction; 2: the mean of the forward and
            backward log-probabilities of each word, as LAMA's ELMo connector combines them).
        k (int): how many words (at most the vocabulary size less ``exclude``).
        exclude (Sequence[int]): ids never returned (they still count in the normalizer).
        RETURNS (Tuple[Tensor, Tensor]): (N, k) float32 mean log-probabilities, best first, and their ids.
        """
        if not 0 < k <= self.n_classes - len(set(exclude)):
            raise ValueError(f"k must be in [1, {self.n_classes - len(set(exclude))}], not {k}")
        normalizers = torch.stack([self.log_normalizer(h) for h in hidden])  # (D, N)
        n = hidden.shape[1]
        best = torch.full((n, 0), float("-inf"), dtype=torch.float32, device=hidden.device)
        best_ids = torch.zeros((n, 0), dtype=torch.long, device=hidden.device)
        excluded = torch.tensor(sorted(set(exclude)), dtype=torch.long, device=hidden.device)
        for start in range(0, self.n_classes, self.chunk_size):
            rows = slice(start, start + self.chunk_size)
            scores = torch.stack([
                torch.addmm(self.bias[rows], h, self.weight[rows].t()).float() - z[:, None]
                for h, z in zip(hidden, normalizers)
            ]).mean(dim=0)
            inside = excluded[(excluded >= start) & (excluded < start + scores.shape[1])] - start
            scores[:, inside] = float("-inf")
            top = scores.topk(min(k, scores.shape[1]), dim=1)
            merged = torch.cat([best, top.values], dim=1)
            merged_ids = torch.cat([best_ids, top.indices + start], dim=1)
            keep = merged.topk(min(k, merged.shape[1]), dim=1)
            best, best_ids = keep.values, merged_ids.gather(1, keep.indices)
        return best, best_ids

    def sampled_nll(self, hidden: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Sampled-softmax loss of each target (a biased estimate of the full NLL, cheap to train on).

        ``logsumexp([true logit, sampled logits]) - true logit``, the cross-entropy of the true
        class among the candidates, computed without materializing that row: the sampled logits
        (N, S) come out of one product with their bias and correction, accidental hits are set
        to -inf in place (their gradient is then zero, as masking would make it), and the loss
        reads them once more (``RowLogSumExp``). ``tests/bilm/test_softmax.py`` checks losses and
        gradients against masking, concatenating and a cross-entropy.
        """
        if self.sampler is None:
            return self.full_nll(hidden, targets)
        candidates, tries = self.sampler.sample()
        candidates = candidates.to(hidden.device)
        log_q_true = torch.log(self.sampler.expected_count(targets.cpu(), tries)).to(hidden.device)
        log_q_sampled = torch.log(self.sampler.expected_count(candidates.cpu(), tries)).to(hidden.device)
        true_logits = (hidden * take_rows(self.weight, targets)).sum(-1) + take_rows(self.bias, targets) - log_q_true.to(hidden.dtype)
        sampled_bias = take_rows(self.bias, candidates) - log_q_sampled.to(self.bias.dtype)
        sampled_logits = torch.addmm(sampled_bias, hidden, take_rows(self.weight, candidates).t())
        # A sampled candidate equal to the target would count the right answer as a negative.
        rows, columns = accidental_hits(candidates, targets, self.n_classes)
        with torch.no_grad():  # the product's backward does not read its output
            sampled_logits[rows, columns] = float("-inf")
        true_logits = true_logits.float()
        return torch.logaddexp(true_logits, RowLogSumExp.apply(sampled_logits.float())) - true_logits

    def forward(self, hidden: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Per-target loss: sampled while training a sampled head, exact otherwise."""
        if self.training and self.is_sampled:
            return self.sampled_nll(hidden, targets)
        return self.full_nll(hidden, targets)


def accidental_hits(candidates: torch.Tensor, targets: torch.Tensor, n_classes: int) -> Tuple[torch.Tensor, torch.Tensor]:
    """Where a target is among the (unique) candidates: its row and the candidate's column."""
    column_of = torch.full((n_classes,), -1, dtype=torch.long, device=candidates.device)
    column_of[candidates] = torch.arange(len(candidates), device=candidates.device)
    columns = column_of[targets]
    rows = torch.nonzero(columns >= 0).flatten()
    return rows, columns[rows]


class RowLogSumExp(torch.autograd.Function):
    """``torch.logsumexp(x, dim=1)`` for (N, S) ``x``, whose backward turns the exponentials the
    forward computed into the softmax in place (torch's recomputes them from ``x``: three more
    passes over an (N, S) tensor). The graph can be walked back once only."""

    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        top = x.amax(dim=1, keepdim=True)
        top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))  # rows of -inf (or inf)
        exps = torch.sub(x, top).exp_()
        sums = exps.sum(dim=1, keepdim=True)
        ctx.save_for_backward(exps, sums)
        ctx.used = False
        return (sums.log() + top).squeeze(1)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        if ctx.used:
            raise RuntimeError("RowLogSumExp's backward ran twice: its saved exponentials became the gradient the first time")
        ctx.used = True
        exps, sums = ctx.saved_tensors
        scale = torch.where(sums > 0, grad[:, None] / sums, torch.zeros_like(sums))  # rows of -inf: 0, not NaN
        return exps.mul_(scale)
