"""A biLM's default token vectors: which layers, in what proportion, and the mean vector taken off.

Raw biLM vectors share a common direction, so any two of them are close in cosine; layer 0
(the character encoding) is the same for every use of a word. A ``VectorSetting`` stored with a
model (``io.vector_file``) says how its token vectors are made by default: a fixed mix of the
layers, minus each layer's mean over a corpus, so that cosine compares what the context changed.
"""
import math
from dataclasses import dataclass, field
from typing import Any, Dict, Optional, Tuple

import numpy as np


@dataclass(frozen=True, eq=False)
class VectorSetting:
    """layer_weights (Tuple[float, ...]): the weight of each of the L+1 layers (non-negative,
        summing to 1; a 0 leaves the layer out).
    layer_means (Optional[np.ndarray]): (L+1, width) float32, each layer's mean over a corpus,
        subtracted from it before mixing; None: nothing is subtracted.
    weights_sha256 (str): the SHA-256 of the weights (``model.safetensors``) they belong to.
    provenance (Dict[str, Any]): where the means and the choice of weights come from (corpus,
        licence, token count, the command and the record that chose them).
    """

    layer_weights: Tuple[float, ...]
    layer_means: Optional[np.ndarray]
    weights_sha256: str
    provenance: Dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "layer_weights", tuple(float(w) for w in self.layer_weights))
        weights = self.layer_weights
        if self.layer_means is not None:
            means = np.ascontiguousarray(self.layer_means, dtype=np.float32)
            object.__setattr__(self, "layer_means", means)
            if means.ndim != 2 or means.shape[0] != len(weights):
                raise ValueError(f"layer_means has shape {means.shape}: expected ({len(weights)}, width), one row a layer")
            if not np.isfinite(means).all():
                raise ValueError("layer_means holds NaN or infinite values")
        if any(not math.isfinite(w) or w < 0 for w in weights) or abs(sum(weights) - 1.0) > 1e-6:
            raise ValueError(f"layer_weights {list(weights)} must be non-negative and sum to 1")

    @property
    def n_layers(self) -> int:
        return len(self.layer_weights)

    @property
    def width(self) -> Optional[int]:
        """RETURNS (Optional[int]): the layers' width, as the means give it (None without means)."""
        return None if self.layer_means is None else int(self.layer_means.shape[1])

    def pre_softmax(self) -> Tuple[float, ...]:
        """RETURNS (Tuple[float, ...]): the weights as pre-softmax mix weights (their logarithms;
        -inf for a layer left out), as ``ElmoOutput.mix_weights`` takes them."""
        return tuple(math.log(w) if w > 0 else -math.inf for w in self.layer_weights)
