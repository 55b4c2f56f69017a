"""Clustering of word uses, and the measures that compare clusterings and distributions.

Written in numpy so that the change scores and sense induction need no scikit-learn; each
follows the reference implementation its method was published with:

- ``affinity_propagation`` (Frey & Dueck 2007, "Clustering by passing messages between data
  points") as scikit-learn's ``AffinityPropagation`` computes it, with the settings of
  Kutuzov & Giulianelli's JSD (github.com/akutuzov/semeval2020, ``code/jsd.py``): features
  standardized (``StandardScaler``), similarity the negative squared Euclidean distance, damping
  0.5, at most 200 iterations, converged after 15 without a change of exemplars, preference the
  median similarity. One deviation, so that two identical periods score no change: where every
  similarity is equal (all uses identical) the uses form one cluster (scikit-learn makes each its
  own cluster when the preference equals the similarities, as the median then does).
- ``average_linkage`` (UPGMA) on cosine distances, as SymPatternWSI clusters substitute
  vectors (Amrami & Goldberg 2018, github.com/asafamr/SymPatternWSI, ``spwsi/wsi_clustering.py``:
  scikit-learn's ``AgglomerativeClustering(linkage="average", affinity="cosine")``).
- ``jensen_shannon``: (KL(p||m) + KL(q||m)) / 2 with m = (p + q) / 2, natural logarithm (so at
  most ln 2), as ``code/jsd.py`` computes it with ``scipy.stats.entropy``.
- ``adjusted_rand_index``: Hubert & Arabie (1985), the index scikit-learn's
  ``adjusted_rand_score`` computes.
"""
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np


@dataclass(frozen=True)
class APSettings:
    """Affinity propagation's settings (defaults: Kutuzov & Giulianelli's ``code/jsd.py``).

    damping (float): weight of the previous messages, in [0.5, 1).
    max_iter (int): most iterations.
    convergence_iter (int): iterations without a change of exemplars that end the run.
    preference (Optional[float]): every point's self-similarity; None: the median similarity.
    seed (int): seed of the tiny noise that breaks ties (scikit-learn's ``random_state``).
    """

    damping: float = 0.5
    max_iter: int = 200
    convergence_iter: int = 15
    preference: Optional[float] = None
    seed: int = 0

    def __post_init__(self) -> None:
        if not 0.5 <= self.damping < 1:
            raise ValueError(f"damping must be in [0.5, 1), not {self.damping}")
        if self.max_iter < 1 or self.convergence_iter < 1:
            raise ValueError("max_iter and convergence_iter must be at least 1")


def standardize(matrix: np.ndarray) -> np.ndarray:
    """Each feature to mean 0 and variance 1 (a constant feature to 0), as ``StandardScaler``."""
    matrix = np.asarray(matrix, dtype=np.float64)
    std = matrix.std(axis=0)
    return (matrix - matrix.mean(axis=0)) / np.where(std > 0, std, 1.0)


def affinity_propagation(points: np.ndarray, settings: APSettings = APSettings()) -> np.ndarray:
    """Cluster labels 0..K-1 of the rows of ``points`` (negative squared Euclidean similarity).

    points (np.ndarray): (n, d), already standardized if that is wanted.
    settings (APSettings): damping, iterations, preference, seed.
    RETURNS (np.ndarray): (n,) int labels; -1 for every point where the run found no exemplar or
        did not converge within ``max_iter`` (scikit-learn's result then).
    """
    points = np.asarray(points, dtype=np.float64)
    n = points.shape[0]
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    squared = (points ** 2).sum(axis=1)
    S = -np.maximum(squared[:, None] + squared[None, :] - 2 * points @ points.T, 0.0)
    preference = np.median(S) if settings.preference is None else float(settings.preference)
    off_diagonal = S[~np.eye(n, dtype=bool)]
    if n == 1 or np.all(off_diagonal == off_diagonal[0]):
        return np.zeros(n, dtype=np.int64)  # the deviation the module docstring names
    S = S.copy()
    S.flat[:: n + 1] = preference
    rng = np.random.RandomState(settings.seed)
    S += (np.finfo(S.dtype).eps * S + np.finfo(S.dtype).tiny * 100) * rng.standard_normal(size=(n, n))
    A = np.zeros((n, n))
    R = np.zeros((n, n))
    history = np.zeros((n, settings.convergence_iter))
    rows = np.arange(n)
    damping = settings.damping
    exemplars = np.zeros(n, dtype=bool)
    converged = False
    for it in range(settings.max_iter):
        total = A + S  # responsibilities: r(i,k) = s(i,k) - max_{k' != k} (a(i,k') + s(i,k'))
        best = np.argmax(total, axis=1)
        first = total[rows, best]
        total[rows, best] = -np.inf
        second = total.max(axis=1)
        new_r = S - first[:, None]
        new_r[rows, best] = S[rows, best] - second
        R = damping * R + (1 - damping) * new_r
        positive = np.maximum(R, 0)  # availabilities: a(i,k) = min(0, r(k,k) + sum_{i' not in {i,k}} max(0, r(i',k)))
        positive.flat[:: n + 1] = R.flat[:: n + 1]
        new_a = positive.sum(axis=0)[None, :] - positive
        self_a = np.diag(new_a).copy()
        new_a = np.minimum(new_a, 0)
        new_a.flat[:: n + 1] = self_a
        A = damping * A + (1 - damping) * new_a
        exemplars = (np.diag(A) + np.diag(R)) > 0
        history[:, it % settings.convergence_iter] = exemplars
        if it >= settings.convergence_iter:
            stable = history.sum(axis=1)
            if np.all((stable == settings.convergence_iter) | (stable == 0)) and exemplars.sum() > 0:
                converged = True
                break
    found = np.flatnonzero(exemplars)
    if found.size == 0 or not converged:
        return np.full(n, -1, dtype=np.int64)
    assigned = np.argmax(S[:, found], axis=1)
    assigned[found] = np.arange(found.size)
    for k in range(found.size):  # each cluster's exemplar: the member most similar to the others
        members = np.flatnonzero(assigned == k)
        found[k] = members[np.argmax(S[np.ix_(members, members)].sum(axis=0))]
    assigned = np.argmax(S[:, found], axis=1)
    assigned[found] = np.arange(found.size)
    _, labels = np.unique(found[assigned], return_inverse=True)
    return labels.astype(np.int64)


def cosine_distances(vectors: np.ndarray, others: Optional[np.ndarray] = None) -> np.ndarray:
    """1 - cosine similarity between the rows of ``vectors`` and of ``others`` (default: itself);
    a zero row is at distance 1 from everything (its cosine taken as 0)."""
    def unit(m: np.ndarray) -> np.ndarray:
        m = np.asarray(m, dtype=np.float64)
        norms = np.linalg.norm(m, axis=1, keepdims=True)
        return m / np.where(norms > 0, norms, 1.0)

    a = unit(vectors)
    b = a if others is None else unit(others)
    return np.clip(1.0 - a @ b.T, 0.0, 2.0)


def average_linkage(vectors: np.ndarray, n_clusters: int) -> np.ndarray:
    """Agglomerative clustering, average linkage (UPGMA) on cosine distance, into ``n_clusters``.

    vectors (np.ndarray): (n, d).
    n_clusters (int): clusters wanted (at most n).
    RETURNS (np.ndarray): (n,) labels 0..n_clusters-1, numbered by each cluster's first member.
    """
    n = vectors.shape[0]
    if not 1 <= n_clusters:
        raise ValueError(f"n_clusters must be at least 1, not {n_clusters}")
    n_clusters = min(n_clusters, n)
    distance = cosine_distances(vectors)
    np.fill_diagonal(distance, np.inf)
    sizes = np.ones(n)
    alive = np.ones(n, dtype=bool)
    owner = np.arange(n)  # each point's cluster, named by a representative index
    for _ in range(n - n_clusters):
        masked = np.where(alive[:, None] & alive[None, :], distance, np.inf)
        i, j = np.unravel_index(np.argmin(masked), masked.shape)
        i, j = min(i, j), max(i, j)
        merged = (sizes[i] * distance[i] + sizes[j] * distance[j]) / (sizes[i] + sizes[j])
        distance[i, :] = merged
        distance[:, i] = merged
        distance[i, i] = np.inf
        sizes[i] += sizes[j]
        alive[j] = False
        owner[owner == j] = i
    _, first = np.unique(owner, return_index=True)
    order = {owner[f]: rank for rank, f in enumerate(sorted(first))}
    return np.array([order[o] for o in owner], dtype=np.int64)


def distribution(labels: Sequence[int], n_labels: int) -> np.ndarray:
    """The share of each label 0..n_labels-1 among ``labels`` (all zeros when there are none)."""
    counts = np.bincount(np.asarray(labels, dtype=np.int64), minlength=n_labels).astype(np.float64)
    return counts / counts.sum() if counts.sum() > 0 else counts


def jensen_shannon(p: Sequence[float], q: Sequence[float]) -> float:
    """Jensen-Shannon divergence in nats: (KL(p||m) + KL(q||m)) / 2, m = (p + q) / 2; p and q are
    normalized first (as ``scipy.stats.entropy`` does). 0 for equal distributions, ln 2 at most."""
    p = np.asarray(p, dtype=np.float64)
    q = np.asarray(q, dtype=np.float64)
    if p.shape != q.shape or p.sum() <= 0 or q.sum() <= 0 or (p < 0).any() or (q < 0).any():
        raise ValueError("jensen_shannon needs two non-negative distributions of one length, each with some mass")
    p, q = p / p.sum(), q / q.sum()
    m = (p + q) / 2

    def kl(a: np.ndarray) -> float:
        nonzero = a > 0
        return float(np.sum(a[nonzero] * np.log(a[nonzero] / m[nonzero])))

    return max((kl(p) + kl(q)) / 2, 0.0)


def adjusted_rand_index(truth: Sequence, found: Sequence) -> float:
    """Adjusted Rand index of two labelings of the same items (1: identical partitions, about 0
    for chance; Hubert & Arabie 1985). Two partitions that are both one cluster, or both all
    singletons, score 1, as scikit-learn's ``adjusted_rand_score``."""
    if len(truth) != len(found):
        raise ValueError(f"the labelings differ in length ({len(truth)} and {len(found)})")
    _, t = np.unique(np.asarray(truth, dtype=object).astype(str), return_inverse=True)
    _, f = np.unique(np.asarray(found, dtype=object).astype(str), return_inverse=True)
    table = np.zeros((t.max(initial=-1) + 1, f.max(initial=-1) + 1))
    np.add.at(table, (t, f), 1)

    def pairs(x: np.ndarray) -> float:
        return float((x * (x - 1) / 2).sum())

    n = len(truth)
    index, rows, cols = pairs(table), pairs(table.sum(axis=1)), pairs(table.sum(axis=0))
    expected = rows * cols / (n * (n - 1) / 2) if n > 1 else 0.0
    maximum = (rows + cols) / 2
    if maximum == expected:
        return 1.0
    return (index - expected) / (maximum - expected)
