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
PRT, 0 for APD, 1 for JSD), so that a ranking leaves the target out instead of ranking it. Every
target without a score says why (``ChangeScore.reason``: too few uses, no convergence of the
clustering, prototypes at a right angle), in the table, the summary and the record.

Targets and gold files follow one case policy, the one matching follows (targets are matched
lower-cased): a gold word is the target spelled the same but for case (``ranking.by_case``), and
two targets, or two gold words, that differ only in case are refused. A run with gold says, in its
evaluation's ``warnings``, which targets the gold leaves out and which gold words have no score.
The record is strict JSON: a value that is not a number (no score, an undefined rho) is null.
"""
import math
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from .clustering import APSettings, affinity_propagation, cosine_distances, distribution, jensen_shannon, standardize
from .ranking import CHANGED_SHARE, accuracy, aligned, binary_labels, by_case, spearman

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


def no_convergence(settings: APSettings) -> str:
    """RETURNS (str): why a jsd score is missing where affinity propagation did not converge."""
    return (f"no convergence: affinity propagation found no stable exemplars in {settings.max_iter} iterations "
            f"(damping {settings.damping}); raise --damping (below 1) or --max-iter")


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
    """target (str). score (float): NaN where there is none.
    uses_a, uses_b (int): the uses scored in each period (kept: at most the usages' cap).
    reason (Optional[str]): why there is no score; None where there is one.
    seen_a, seen_b (Optional[int]): the uses each period's corpus holds, where known."""

    target: str
    score: float
    uses_a: int
    uses_b: int
    reason: Optional[str] = None
    seen_a: Optional[int] = None
    seen_b: Optional[int] = None


def explained_score(a: np.ndarray, b: np.ndarray, settings: ChangeSettings) -> Tuple[float, Optional[str]]:
    """One target's score under ``settings``, and why there is none where it is NaN or infinite.

    RETURNS (Tuple[float, Optional[str]]): the score (NaN: none) and the reason (None: scored).
    """
    if len(a) < settings.min_uses or len(b) < settings.min_uses:
        return float("nan"), (f"too few uses: {len(a)} in the first period and {len(b)} in the second, "
                              f"fewer than {settings.min_uses} in a period (--min-uses)")
    if settings.metric == "prt":
        score = prt(a, b)
        if math.isinf(score):
            return float("nan"), "the periods' mean vectors are at a right angle: 1 / cos is infinite"
        return score, None
    if settings.metric == "apd":
        return apd(a, b), None
    score = jsd(a, b, settings.clustering)
    return score, (no_convergence(settings.clustering) if math.isnan(score) else None)


def change_score(a: np.ndarray, b: np.ndarray, settings: ChangeSettings) -> float:
    """One target's score under ``settings`` (NaN where there is none: ``explained_score`` says why)."""
    return explained_score(a, b, settings)[0]


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
        score, reason = explained_score(a, b, settings)
        scores.append(ChangeScore(target, score, len(a), len(b), reason))
    return scores


def format_score(value: float) -> str:
    return "nan" if math.isnan(value) else f"{value:.6f}"


def strict_json(value: Any) -> Any:
    """``value`` with every float that is not a number (NaN, infinite) replaced by None, through dicts
    and lists: what strict JSON parsers read (``json.dumps(..., allow_nan=False)`` holds it)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: strict_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [strict_json(v) for v in value]
    return value


def unscored(scores: Sequence[ChangeScore]) -> List[str]:
    """One line per kind of missing score: how many targets, and the first one's full reason.

    RETURNS (List[str]): empty where every target has a score.
    """
    kinds: Dict[str, List[ChangeScore]] = {}
    for s in scores:
        if s.reason is not None:
            kinds.setdefault(s.reason.split(":")[0], []).append(s)
    return [f"{len(found)} target{'s' if len(found) != 1 else ''} without a score for {kind} "
            f"(the first, {found[0].target!r}: {found[0].reason})" for kind, found in kinds.items()]


@dataclass
class ChangeRun:
    """A change run as the ``change`` command makes it: the scores, the settings of the usages they
    came from, and their evaluation against gold files (``run_change``).

    settings (ChangeSettings). usages (Dict[str, Any]): the periods' usage settings.
    scores (List[ChangeScore]). evaluation (Dict[str, Any]): "spearman" and "binary", where gold was
        given, and "warnings" where the gold and the targets do not match one to one.
    """

    settings: ChangeSettings
    usages: Dict[str, Any]
    scores: List[ChangeScore]
    evaluation: Dict[str, Any] = field(default_factory=dict)

    def tsv(self) -> str:
        """RETURNS (str): target<TAB>score<TAB>uses_a<TAB>uses_b<TAB>reason, a header and a line per
        target (the reason empty where there is a score)."""
        rows = [f"{s.target}\t{format_score(s.score)}\t{s.uses_a}\t{s.uses_b}\t{s.reason or ''}" for s in self.scores]
        return "\n".join(["target\tscore\tuses_a\tuses_b\treason", *rows]) + "\n"

    def warnings(self) -> List[str]:
        """RETURNS (List[str]): what the run should say beside its scores: the targets without a score
        and why (``unscored``), and where gold and targets do not match one to one."""
        return [*unscored(self.scores), *self.evaluation.get("warnings", [])]

    def summary(self) -> Dict[str, Any]:
        """RETURNS (Dict[str, Any]): the settings, the evaluation and the targets without a score with
        why (what the command prints as JSON), strict JSON."""
        return strict_json({"change": self.settings.record(), "usages": self.usages, **self.evaluation,
                            "without_score": {s.target: s.reason for s in self.scores if s.reason is not None}})

    def record(self, provenance: Dict[str, Any], corpora: Sequence[str]) -> Dict[str, Any]:
        """RETURNS (Dict[str, Any]): the JSON record: provenance, settings, evaluation, corpora, scores
        (each with the uses kept and seen a period, and its reason where it has no score), strict JSON."""
        return strict_json({"provenance": provenance, "change": self.settings.record(), "usages": self.usages,
                            "evaluation": self.evaluation, "corpora": list(corpora),
                            "scores": [{"target": s.target, "score": s.score, "uses_a": s.uses_a, "uses_b": s.uses_b,
                                        "seen_a": s.seen_a, "seen_b": s.seen_b, "reason": s.reason}
                                       for s in self.scores]})


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
    A gold word matches the target spelled the same but for case (the module docstring).
    RETURNS (ChangeRun): the run. Raises ValueError for periods collected differently, and where gold
        is given but no target has a score (an evaluation of nothing), naming why.
    """
    first, second = (p.settings for p in periods)
    if (first.layer, first.model, first.match) != (second.layer, second.model, second.match):
        raise ValueError(f"the periods' usages differ: layer {first.layer} / {second.layer}, model "
                         f"{first.model} / {second.model}, match {first.match} / {second.match}")
    scores = [replace(s, seen_a=periods[0].found.get(s.target), seen_b=periods[1].found.get(s.target))
              for s in change_scores(periods[0].vectors, periods[1].vectors, targets, settings)]
    usages = {"layer": first.layer, "match": first.match, "max_uses": first.max_uses, "seed": first.seed,
              "max_tokens": first.max_tokens, "model": first.model}
    by_target = {s.target: s.score for s in scores}
    if (graded is not None or binary is not None) and all(math.isnan(v) for v in by_target.values()):
        raise ValueError("no target has a score, so there is nothing to evaluate against the gold: "
                         + "; ".join(unscored(scores)))
    evaluation: Dict[str, Any] = {}
    warnings: List[str] = []
    if graded is not None:
        graded = by_case(graded, targets)
        correlation = spearman(*aligned(by_target, graded))
        evaluation["spearman"] = {"rho": correlation.rho, "p_value": correlation.p_value, "targets": correlation.n,
                                  "without_score": len(graded) - correlation.n}
        warnings += gold_warnings("graded", graded, scores)
    if binary is not None:
        binary = by_case(binary, targets)
        labels = binary_labels({t: by_target.get(t, math.nan) for t in binary}, changed_share=changed_share)
        evaluation["binary"] = {"accuracy": accuracy(labels, binary), "changed_share": changed_share,
                                "rule": "top int(n * changed_share) by score labelled 1 (akutuzov/semeval2020 ling_features/helpers.py)"}
        warnings += gold_warnings("binary", binary, scores)
    if warnings:
        evaluation["warnings"] = warnings
    return ChangeRun(settings, usages, scores, evaluation)


def gold_warnings(kind: str, gold: Dict[str, float], scores: Sequence[ChangeScore]) -> List[str]:
    """What a gold standard and the scored targets do not share: targets it leaves out, and its words
    without a score (not a target, or a target with no score, with why).

    kind (str): "graded" or "binary", for the message. gold (Dict[str, float]): matched to the targets.
    RETURNS (List[str]): one line per kind of mismatch; empty where they match one to one.
    """
    scored = {s.target: s for s in scores}
    said = []
    left_out = [s.target for s in scores if s.target not in gold]
    if left_out:
        said.append(f"the {kind} gold covers {len(scores) - len(left_out)} of the {len(scores)} targets; "
                    f"not in it: {', '.join(left_out[:10])}{', ...' if len(left_out) > 10 else ''}")
    strangers = [w for w in gold if w not in scored]
    if strangers:
        said.append(f"{len(strangers)} {kind} gold word{'s are' if len(strangers) != 1 else ' is'} not a target, so "
                    f"without a score: {', '.join(strangers[:10])}{', ...' if len(strangers) > 10 else ''}")
    missing = [scored[w] for w in gold if w in scored and scored[w].reason is not None]
    if missing:
        said.append(f"{len(missing)} {kind} gold word{'s have' if len(missing) != 1 else ' has'} no score: "
                    + "; ".join(f"{s.target} ({s.reason})" for s in missing[:5]) + ("; ..." if len(missing) > 5 else ""))
    return said
