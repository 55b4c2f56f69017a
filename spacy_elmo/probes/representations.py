"""What a probe compares: each biLM layer alone, the plain mean of the layers, a learned scalar mix.

Row names are the keys of every result: ``layer 0`` .. ``layer L``, ``mean``, ``scalar mix``,
then the baselines (``majority``, ``word identity``) that need no vectors.
"""
import itertools
from typing import Iterator, List, Tuple

import numpy as np

MEAN = "mean"
MIX = "scalar mix"
MAJORITY = "majority"
WORD_IDENTITY = "word identity"
BASELINES = (MAJORITY, WORD_IDENTITY)


def layer_row(index: int) -> str:
    return f"layer {index}"


def fixed_rows(n_layers: int) -> List[str]:
    """RETURNS (List[str]): the rows read straight off the layers: each one, then their mean."""
    return [layer_row(k) for k in range(n_layers)] + [MEAN]


def row_vectors(stacked: np.ndarray, row: str) -> np.ndarray:
    """stacked (np.ndarray): (L+1, N, width) vectors. RETURNS (np.ndarray): (N, width) for a fixed row."""
    if row == MEAN:
        return stacked.mean(axis=0)
    return stacked[int(row.split()[-1])]


def row_weights(row: str, n_layers: int) -> Tuple[float, ...]:
    """RETURNS (Tuple[float, ...]): a fixed row as mix weights (one-hot for a layer, uniform for the mean)."""
    if row == MEAN:
        return (1.0 / n_layers,) * n_layers
    index = int(row.split()[-1])
    return tuple(1.0 if k == index else 0.0 for k in range(n_layers))


def simplex_weights(n_layers: int, steps: int = 10) -> Iterator[Tuple[float, ...]]:
    """Every mix of ``n_layers`` layers with weights in multiples of 1/steps summing to 1 (66 for 3 layers).

    Nearest-neighbour probes have no gradient to learn a mix with, so their scalar mix is
    the point of this grid that scores best on the training data.
    """
    for cuts in itertools.combinations(range(steps + n_layers - 1), n_layers - 1):
        bounds = (-1,) + cuts + (steps + n_layers - 1,)
        yield tuple((bounds[i + 1] - bounds[i] - 1) / steps for i in range(n_layers))


def mix(stacked: np.ndarray, weights: Tuple[float, ...]) -> np.ndarray:
    """RETURNS (np.ndarray): sum_j weights_j * stacked_j, (N, width)."""
    return np.tensordot(np.asarray(weights, dtype=stacked.dtype), stacked, axes=1)


def unit(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=-1, keepdims=True)
    return vectors / np.maximum(norms, 1e-12)
