"""Change scores against a gold standard: Spearman's rank correlation with its p-value, and the
binary decision of SemEval-2020 Task 1's Subtask 1.

Gold files are SemEval-2020 Task 1's (``truth/graded.txt`` and ``truth/binary.txt``): one target a
line, ``target<TAB>score``; the binary file's scores are 0 or 1. A gold word is matched to a target
as the text is, lower-cased (``by_case``; two gold words that differ only in case are refused).

- ``spearman``: ``scipy.stats.spearmanr`` (Pearson's correlation of the two rankings, ties given
  their average rank; the two-sided p-value from Student's t with n - 2 degrees of freedom), as the
  task's scorer and Kutuzov & Giulianelli's ``code/eval.py`` call it, ``nan_policy='omit'``:
  targets without a score are left out.
- ``binary_labels``: the top ``int(n * 0.43)`` targets by score are labelled changed (1), the others
  0: the "semeval" rule of github.com/akutuzov/semeval2020 ``code/ling_features/helpers.py``
  (43% is the share of changed words over the task's four test sets).
"""
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Mapping, Sequence, Tuple, Union

import numpy as np

from .extra import missing_statistics
from .usages import case_keys

try:
    from scipy.stats import spearmanr
except ImportError as err:
    raise ImportError(missing_statistics(err)) from None

PathLike = Union[str, Path]
CHANGED_SHARE = 0.43


@dataclass(frozen=True)
class Correlation:
    """rho (float): Spearman's rho. p_value (float): two-sided. n (int): targets compared."""

    rho: float
    p_value: float
    n: int


def spearman(scores: Sequence[float], gold: Sequence[float]) -> Correlation:
    """Spearman's rho of ``scores`` against ``gold`` and its two-sided p-value; pairs where either is
    NaN are left out. Fewer than 3 pairs, or a constant side, give NaN."""
    x = np.asarray(scores, dtype=np.float64)
    y = np.asarray(gold, dtype=np.float64)
    if x.shape != y.shape:
        raise ValueError(f"{len(x)} scores for {len(y)} gold values")
    keep = ~(np.isnan(x) | np.isnan(y))
    x, y = x[keep], y[keep]
    n = len(x)
    if n < 3 or np.all(x == x[0]) or np.all(y == y[0]):
        return Correlation(float("nan"), float("nan"), n)
    found = spearmanr(x, y)
    return Correlation(float(found.statistic), float(found.pvalue), n)


def binary_labels(scores: Mapping[str, float], *, changed_share: float = CHANGED_SHARE) -> Dict[str, int]:
    """1 for the top ``int(len(scores) * changed_share)`` targets by score, 0 for the others (a
    target without a score, NaN, ranks last). Ties keep the targets' order in ``scores``."""
    if not 0.0 <= changed_share <= 1.0:
        raise ValueError(f"changed_share must be in [0, 1], not {changed_share}")
    ordered = sorted(scores, key=lambda t: (math.isnan(scores[t]), -scores[t] if not math.isnan(scores[t]) else 0.0))
    cut = int(len(ordered) * changed_share)
    return {target: int(i < cut) for i, target in enumerate(ordered)}


def accuracy(predicted: Mapping[str, int], gold: Mapping[str, float]) -> float:
    """Share of the gold targets whose predicted label equals the gold one (the task's Subtask 1
    score); a gold target without a prediction counts as wrong."""
    if not gold:
        raise ValueError("the binary gold standard is empty")
    return sum(int(predicted.get(t, -1) == int(v)) for t, v in gold.items()) / len(gold)


def read_gold(path: PathLike) -> Dict[str, float]:
    """A gold file, ``target<TAB>score`` a line (SemEval-2020 Task 1's truth files).

    RETURNS (Dict[str, float]): target to score, in file order.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: gold file not found")
    gold: Dict[str, float] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        parts = line.rstrip("\n").split("\t")
        try:
            gold[parts[0].strip()] = float(parts[1])
        except (IndexError, ValueError):
            raise ValueError(f"{path}, line {number}: expected 'target<TAB>score', got {line!r}") from None
    if not gold:
        raise ValueError(f"{path}: no targets in the gold file")
    case_keys(gold, where=str(path))
    return gold


def by_case(gold: Mapping[str, float], targets: Sequence[str]) -> Dict[str, float]:
    """The gold re-keyed by the targets' spelling: a gold word is the target it equals lower-cased
    (a word that is no target keeps its own).

    RETURNS (Dict[str, float]): in the gold's order.
    """
    spelled = case_keys(targets, where="the targets")
    return {spelled.get(word.lower(), word): value for word, value in gold.items()}


def aligned(scores: Mapping[str, float], gold: Mapping[str, float]) -> Tuple[np.ndarray, np.ndarray]:
    """The scores and gold values of the gold's targets, in the gold's order (NaN where a target
    has no score)."""
    return (np.array([scores.get(t, float("nan")) for t in gold], dtype=np.float64),
            np.array(list(gold.values()), dtype=np.float64))
