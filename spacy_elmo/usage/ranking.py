"""Change scores against a gold standard: Spearman's rank correlation with its p-value, and the
binary decision of SemEval-2020 Task 1's Subtask 1.

Gold files are SemEval-2020 Task 1's (``truth/graded.txt`` and ``truth/binary.txt``): one target a
line, ``target<TAB>score``; the binary file's scores are 0 or 1.

- ``spearman``: Pearson's correlation of the two rankings, ties given their average rank; the
  two-sided p-value from Student's t with n - 2 degrees of freedom,
  t = rho * sqrt((n - 2) / (1 - rho^2)), as ``scipy.stats.spearmanr`` computes it (which the
  task's scorer and Kutuzov & Giulianelli's ``code/eval.py`` call, ``nan_policy='omit'``: targets
  without a score are left out).
- ``binary_labels``: the top ``int(n * 0.43)`` targets by score are labelled changed (1), the others
  0: the "semeval" rule of github.com/akutuzov/semeval2020 ``code/ling_features/helpers.py``
  (43% is the share of changed words over the task's four test sets).
"""
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Mapping, Sequence, Tuple, Union

import numpy as np

PathLike = Union[str, Path]
CHANGED_SHARE = 0.43


@dataclass(frozen=True)
class Correlation:
    """rho (float): Spearman's rho. p_value (float): two-sided. n (int): targets compared."""

    rho: float
    p_value: float
    n: int


def ranks(values: Sequence[float]) -> np.ndarray:
    """Ranks 1..n, ties given the mean of the ranks they span."""
    values = np.asarray(values, dtype=np.float64)
    order = np.argsort(values, kind="stable")
    result = np.empty(len(values))
    sorted_values = values[order]
    start = 0
    while start < len(values):
        end = start
        while end + 1 < len(values) and sorted_values[end + 1] == sorted_values[start]:
            end += 1
        result[order[start : end + 1]] = (start + end) / 2 + 1
        start = end + 1
    return result


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
    rx, ry = ranks(x) - (n + 1) / 2, ranks(y) - (n + 1) / 2
    rho = float(np.clip((rx @ ry) / math.sqrt((rx @ rx) * (ry @ ry)), -1.0, 1.0))
    return Correlation(rho, t_test_p(rho, n), n)


def t_test_p(r: float, n: int) -> float:
    """Two-sided p-value of a correlation r over n pairs: P(|T| >= |t|), T ~ Student's t (n - 2 dof)."""
    dof = n - 2
    if abs(r) >= 1.0:
        return 0.0
    t_squared = r * r * dof / (1 - r * r)
    # P(|T| >= t) = I_x(dof/2, 1/2) with x = dof / (dof + t^2): the regularized incomplete beta
    return regularized_beta(dof / (dof + t_squared), dof / 2, 0.5)


def regularized_beta(x: float, a: float, b: float) -> float:
    """I_x(a, b), the regularized incomplete beta function, by its continued fraction (modified
    Lentz's method, Numerical Recipes 6.4), to about 1e-14."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    if x > (a + 1) / (a + b + 2):  # the fraction converges fast only below this point: use the symmetry
        return 1.0 - math.exp(log_front) * _beta_fraction(1 - x, b, a) / b
    return math.exp(log_front) * _beta_fraction(x, a, b) / a


def _beta_fraction(x: float, a: float, b: float) -> float:
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 500):
        for numerator in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                          -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return h


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
    return gold


def aligned(scores: Mapping[str, float], gold: Mapping[str, float]) -> Tuple[np.ndarray, np.ndarray]:
    """The scores and gold values of the gold's targets, in the gold's order (NaN where a target
    has no score)."""
    return (np.array([scores.get(t, float("nan")) for t in gold], dtype=np.float64),
            np.array(list(gold.values()), dtype=np.float64))
