"""Lexical semantic change between two corpora, from the usage matrices of ``usages.py``.

The three measures of Kutuzov & Giulianelli, "UiO-UvA at SemEval-2020 Task 1: Contextualised
Embeddings for Lexical Semantic Change Detection" (github.com/akutuzov/semeval2020), as their code
computes them:

- ``prt`` (``code/cosine.py``, mode "mean"): 1 / cos(mean of period A's usage vectors, mean of
  period B's): the inverted cosine similarity of the two prototypes. 1 for no change, growing
  with change (and negative where the prototypes point apart).
- ``apd`` (``code/distance.py``): the mean cosine distance, 1 - cos, over all pairs of a use from
  A and a use from B. 0 only where every use in both periods has one direction.
- ``jsd`` (``code/jsd.py``): both periods' uses clustered together by affinity propagation on
  standardized vectors (``clustering.affinity_propagation``, settings ``APSettings``), then the
  Jensen-Shannon divergence (nats) of the two periods' distributions over the clusters. 0 when
  each cluster holds the same share of both periods.

Where a period has fewer than ``min_uses`` uses of a target (the reference's cosine.py skips
fewer than 3) the score is NaN: no score, rather than the reference's placeholder values (10 for
PRT, 0 for APD, 1 for JSD), so that a ranking leaves the target out instead of ranking it.
"""
import math
from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from .clustering import APSettings, affinity_propagation, cosine_distances, distribution, jensen_shannon, standardize
from .ranking import CHANGED_SHARE, accuracy, aligned, binary_labels, spearman

METRICS = ("prt", "apd", "jsd")
MIN_USES = 3
SOURCES = {
    "prt": "Kutuzov & Giulianelli (2020), github.com/akutuzov/semeval2020 code/cosine.py: 1 / cos(mean A, mean B)",
    "apd": "Kutuzov & Giulianelli (2020), github.com/akutuzov/semeval2020 code/distance.py: mean cosine distance "
           "over all cross-period pairs",
    "jsd": "Kutuzov & Giulianelli (2020), github.com/akutuzov/semeval2020 code/jsd.py: JSD (nats) of the periods' "
           "shares of affinity propagation clusters (standardized vectors, negative squared Euclidean similarity)",
}


def prt(a: np.ndarray, b: np.ndarray) -> float:
    """Inverted cosine similarity of the two periods' mean vectors: 1 / cos(mean(a), mean(b))."""
    _check(a, b)
    cosine = 1.0 - float(cosine_distances(a.mean(axis=0, keepdims=True), b.mean(axis=0, keepdims=True))[0, 0])
    return 1.0 / cosine if cosine != 0 else float("inf")


def apd(a: np.ndarray, b: np.ndarray) -> float:
    """Average pairwise cosine distance between the uses of period A and those of period B."""
    _check(a, b)
    return float(cosine_distances(a, b).mean())


def jsd(a: np.ndarray, b: np.ndarray, settings: APSettings = APSettings()) -> float:
    """Jensen-Shannon divergence of the periods' distributions over usage clusters (see the module
    docstring); NaN if affinity propagation found no exemplar (it did not converge)."""
    labels = cluster_periods(a, b, settings)
    if (labels < 0).any():
        return float("nan")
    k = int(labels.max()) + 1
    return jensen_shannon(distribution(labels[: len(a)], k), distribution(labels[len(a):], k))


def cluster_periods(a: np.ndarray, b: np.ndarray, settings: APSettings = APSettings()) -> np.ndarray:
    """Affinity propagation labels of both periods' uses together (A's rows first)."""
    _check(a, b)
    return affinity_propagation(standardize(np.vstack([a, b])), settings)


def _check(a: np.ndarray, b: np.ndarray) -> None:
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[1]:
        raise ValueError(f"two usage matrices of one width are needed, not shapes {a.shape} and {b.shape}")
    if len(a) == 0 or len(b) == 0:
        raise ValueError("a period without uses has no change score")


@dataclass(frozen=True)
class ChangeSettings:
    """What the scores depend on beside the usage matrices.

    metric (str): "prt", "apd" or "jsd". min_uses (int): fewer uses in a period give NaN.
    clustering (APSettings): for jsd.
    """

    metric: str
    min_uses: int = MIN_USES
    clustering: APSettings = field(default_factory=APSettings)

    def __post_init__(self) -> None:
        if self.metric not in METRICS:
            raise ValueError(f"metric must be one of {', '.join(METRICS)}, not {self.metric!r}")
        if self.min_uses < 1:
            raise ValueError(f"min_uses must be at least 1, not {self.min_uses}")

    def record(self) -> Dict[str, Any]:
        described: Dict[str, Any] = {"metric": self.metric, "definition": SOURCES[self.metric], "min_uses": self.min_uses}
        if self.metric == "jsd":
            described["clustering"] = {"method": "affinity propagation", **asdict(self.clustering),
                                       "preference_rule": "median similarity" if self.clustering.preference is None else "given"}
        return described


@dataclass(frozen=True)
class ChangeScore:
    """target (str). score (float): NaN where a period has fewer than min_uses uses.
    uses_a, uses_b (int): the uses scored in each period."""

    target: str
    score: float
    uses_a: int
    uses_b: int


def change_score(a: np.ndarray, b: np.ndarray, settings: ChangeSettings) -> float:
    """One target's score under ``settings`` (NaN with too few uses)."""
    if len(a) < settings.min_uses or len(b) < settings.min_uses:
        return float("nan")
    if settings.metric == "prt":
        return prt(a, b)
    if settings.metric == "apd":
        return apd(a, b)
    return jsd(a, b, settings.clustering)


def change_scores(
    first: Dict[str, np.ndarray], second: Dict[str, np.ndarray], targets: Sequence[str], settings: ChangeSettings
) -> List[ChangeScore]:
    """The change of each target between two usage matrices' periods.

    first, second (Dict[str, np.ndarray]): per target, (n_uses, width) vectors of period A and B.
    targets (Sequence[str]): what to score, in this order.
    RETURNS (List[ChangeScore]): one per target.
    """
    width = {m.shape[1] for d in (first, second) for m in d.values() if m.size}
    if len(width) > 1:
        raise ValueError(f"the two periods' vectors differ in width ({sorted(width)}): collect both with one model and layer")
    empty = np.zeros((0, width.pop() if width else 1), dtype=np.float32)
    scores = []
    for target in targets:
        a, b = first.get(target, empty), second.get(target, empty)
        scores.append(ChangeScore(target, change_score(a, b, settings), len(a), len(b)))
    return scores


def format_score(value: float) -> str:
    return "nan" if math.isnan(value) else f"{value:.6f}"


@dataclass
class ChangeRun:
    """A change run as the ``change`` command makes it: the scores, the settings of the usages they
    came from, and their evaluation against gold files (``run_change``).

    settings (ChangeSettings). usages (Dict[str, Any]): the periods' usage settings.
    scores (List[ChangeScore]). evaluation (Dict[str, Any]): "spearman" and "binary", where gold was given.
    """

    settings: ChangeSettings
    usages: Dict[str, Any]
    scores: List[ChangeScore]
    evaluation: Dict[str, Any] = field(default_factory=dict)

    def tsv(self) -> str:
        """RETURNS (str): target<TAB>score<TAB>uses_a<TAB>uses_b, a header and a line per target."""
        rows = [f"{s.target}\t{format_score(s.score)}\t{s.uses_a}\t{s.uses_b}" for s in self.scores]
        return "\n".join(["target\tscore\tuses_a\tuses_b", *rows]) + "\n"

    def summary(self) -> Dict[str, Any]:
        """RETURNS (Dict[str, Any]): the settings and the evaluation (what the command prints as JSON)."""
        return {"change": self.settings.record(), "usages": self.usages, **self.evaluation}

    def record(self, provenance: Dict[str, Any], corpora: Sequence[str]) -> Dict[str, Any]:
        """RETURNS (Dict[str, Any]): the JSON record: provenance, settings, evaluation, corpora, scores."""
        return {"provenance": provenance, "change": self.settings.record(), "usages": self.usages,
                "evaluation": self.evaluation, "corpora": list(corpora),
                "scores": [{"target": s.target, "score": None if math.isnan(s.score) else s.score,
                            "uses_a": s.uses_a, "uses_b": s.uses_b} for s in self.scores]}


def run_change(
    periods: Sequence[Any],
    targets: Sequence[str],
    settings: ChangeSettings,
    *,
    graded: Optional[Dict[str, float]] = None,
    binary: Optional[Dict[str, float]] = None,
    changed_share: float = CHANGED_SHARE,
) -> ChangeRun:
    """Score the targets' change between two periods' usages and evaluate against gold.

    periods (Sequence[UsageSet]): the two periods, collected with one model, layer and match.
    graded (Optional[Dict[str, float]]): graded gold: Spearman's rho of the scores.
    binary (Optional[Dict[str, float]]): binary gold: the accuracy of labelling the top
        ``changed_share`` of the targets changed.
    RETURNS (ChangeRun): the run. Raises ValueError for periods collected differently, and where gold
        is given but no target has a score (an evaluation of nothing).
    """
    first, second = (p.settings for p in periods)
    if (first.layer, first.model, first.match) != (second.layer, second.model, second.match):
        raise ValueError(f"the periods' usages differ: layer {first.layer} / {second.layer}, model "
                         f"{first.model} / {second.model}, match {first.match} / {second.match}")
    scores = change_scores(periods[0].vectors, periods[1].vectors, targets, settings)
    usages = {"layer": first.layer, "match": first.match, "max_uses": first.max_uses, "seed": first.seed,
              "max_tokens": first.max_tokens, "model": first.model}
    by_target = {s.target: s.score for s in scores}
    if (graded is not None or binary is not None) and all(math.isnan(v) for v in by_target.values()):
        raise ValueError(f"no target has a score (each has fewer than {settings.min_uses} uses in a period), "
                         "so there is nothing to evaluate against the gold; check the targets and corpora")
    evaluation: Dict[str, Any] = {}
    if graded is not None:
        correlation = spearman(*aligned(by_target, graded))
        evaluation["spearman"] = {"rho": correlation.rho, "p_value": correlation.p_value, "targets": correlation.n,
                                  "without_score": len(graded) - correlation.n}
    if binary is not None:
        labels = binary_labels({t: by_target.get(t, math.nan) for t in binary}, changed_share=changed_share)
        evaluation["binary"] = {"accuracy": accuracy(labels, binary), "changed_share": changed_share,
                                "rule": "top int(n * changed_share) by score labelled 1 (akutuzov/semeval2020 ling_features/helpers.py)"}
    return ChangeRun(settings, usages, scores, evaluation)
