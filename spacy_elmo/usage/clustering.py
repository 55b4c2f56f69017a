"""Clustering of word uses, and the measures that compare clusterings and distributions.

scikit-learn and scipy compute them (the ``usage`` extra), each with the settings of the reference
implementation its method was published with:

- ``affinity_propagation``: scikit-learn's ``AffinityPropagation`` (Frey & Dueck 2007, "Clustering
  by passing messages between data points") as Kutuzov & Giulianelli's JSD runs it
  (github.com/akutuzov/semeval2020, ``code/jsd.py``: features standardized, ``StandardScaler``;
  similarity the negative squared Euclidean distance; preference the median similarity), with the
  message-passing settings of Frey & Dueck's own implementation (``apcluster``: damping 0.9, at most
  1,000 iterations, converged after 100 without a change of exemplars; ``APSettings``). The
  semeval2020 code, and Martinc et al. (2020, github.com/matejMartinc/scalable_semantic_shift),
  keep scikit-learn's defaults (damping 0.5, 200 or 150 iterations, 15 to converge) and take the
  labels of the last iteration whether it converged or not. Usages of a word in real or templated
  text hold many near-identical vectors (one phrase, many uses), and on such ties the messages
  oscillate at damping 0.5: no exemplar set is reached, and scikit-learn's labels then depend on
  where the run stopped. Frey & Dueck's damping is the one they give for that case ("higher values
  ... may be needed if oscillations occur"), and more iterations let a heavily damped run settle.
  Two deviations from scikit-learn, so that a score means what it says: where every similarity is
  equal (all uses identical) the uses form one cluster (scikit-learn makes each its own cluster
  when the preference equals the similarities, as the median then does, which scores two identical
  periods as changed); and a run that does not converge labels every point -1 (scikit-learn warns
  and labels by the exemplars of its last iteration, where it has any), which the JSD reports as
  "no convergence".
- ``average_linkage`` (UPGMA) on cosine distances, scipy's ``linkage(method="average")`` cut into
  ``n_clusters``, as SymPatternWSI clusters substitute vectors (Amrami & Goldberg 2018,
  github.com/asafamr/SymPatternWSI, ``spwsi/wsi_clustering.py``: scikit-learn's
  ``AgglomerativeClustering(linkage="average", affinity="cosine")``).
- ``jensen_shannon``: (KL(p||m) + KL(q||m)) / 2 with m = (p + q) / 2, natural logarithm (so at
  most ln 2), as ``code/jsd.py`` computes it: the square of scipy's ``jensenshannon`` distance.
- ``adjusted_rand_index``: Hubert & Arabie (1985), scikit-learn's ``adjusted_rand_score``.
"""
import warnings
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

from .extra import missing_statistics

try:
    from scipy.cluster.hierarchy import cut_tree, linkage
    from scipy.spatial.distance import jensenshannon, squareform
    from sklearn.cluster import AffinityPropagation
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.metrics import adjusted_rand_score
    from sklearn.preprocessing import StandardScaler
except ImportError as err:
    raise ImportError(missing_statistics(err)) from None


@dataclass(frozen=True)
class APSettings:
    """Affinity propagation's settings (defaults: Frey & Dueck's ``apcluster``, the module docstring says why).

    damping (float): weight of the previous messages, in [0.5, 1).
    max_iter (int): most iterations.
    convergence_iter (int): iterations without a change of exemplars that end the run.
    preference (Optional[float]): every point's self-similarity; None: the median similarity.
    seed (int): seed of the tiny noise that breaks ties (scikit-learn's ``random_state``).
    """

    damping: float = 0.9
    max_iter: int = 1000
    convergence_iter: int = 100
    preference: Optional[float] = None
    seed: int = 0

    def __post_init__(self) -> None:
        if not 0.5 <= self.damping < 1:
            raise ValueError(f"damping must be in [0.5, 1), not {self.damping}")
        if self.max_iter < 1 or self.convergence_iter < 1:
            raise ValueError("max_iter and convergence_iter must be at least 1")


def standardize(matrix: np.ndarray) -> np.ndarray:
    """Each feature to mean 0 and variance 1 (a constant feature to 0): ``StandardScaler``."""
    return StandardScaler().fit_transform(np.asarray(matrix, dtype=np.float64))


def affinity_propagation(points: np.ndarray, settings: APSettings = APSettings()) -> np.ndarray:
    """Cluster labels 0..K-1 of the rows of ``points`` (negative squared Euclidean similarity).

    points (np.ndarray): (n, d), already standardized if that is wanted.
    settings (APSettings): damping, iterations, preference, seed.
    RETURNS (np.ndarray): (n,) int labels; -1 for every point where the run did not converge
        within ``max_iter`` or found no exemplar.
    """
    points = np.asarray(points, dtype=np.float64)
    n = points.shape[0]
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    squared = (points ** 2).sum(axis=1)
    # the negative squared Euclidean distance, rounded as this module always has: on repeated points
    # (every use of a word at layer 0) scikit-learn's euclidean_distances, an ulp off, can pick other exemplars
    similarity = -np.maximum(squared[:, None] + squared[None, :] - 2 * points @ points.T, 0.0)
    off_diagonal = similarity[~np.eye(n, dtype=bool)]
    if n == 1 or np.all(off_diagonal == off_diagonal[0]):
        return np.zeros(n, dtype=np.int64)  # the first deviation the module docstring names
    model = AffinityPropagation(damping=settings.damping, max_iter=settings.max_iter, convergence_iter=settings.convergence_iter,
                                preference=settings.preference, affinity="precomputed", random_state=settings.seed)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        labels = model.fit_predict(similarity)
    if any(issubclass(w.category, ConvergenceWarning) for w in caught):
        return np.full(n, -1, dtype=np.int64)  # the second
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
    if n < 2:
        return np.zeros(n, dtype=np.int64)
    tree = linkage(squareform(cosine_distances(vectors), checks=False), method="average")
    cut = cut_tree(tree, n_clusters=min(n_clusters, n))[:, 0]
    _, first, found = np.unique(cut, return_index=True, return_inverse=True)
    return np.argsort(np.argsort(first))[found].astype(np.int64)


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
    return float(jensenshannon(p, q) ** 2)  # scipy's is the distance, the divergence's square root


def adjusted_rand_index(truth: Sequence, found: Sequence) -> float:
    """Adjusted Rand index of two labelings of the same items (1: identical partitions, about 0
    for chance; Hubert & Arabie 1985). Two partitions that are both one cluster, or both all
    singletons, score 1."""
    if len(truth) != len(found):
        raise ValueError(f"the labelings differ in length ({len(truth)} and {len(found)})")
    return float(adjusted_rand_score(np.asarray(truth, dtype=object).astype(str), np.asarray(found, dtype=object).astype(str)))
