"""The data the `elmo` component puts on a Doc (and hands to its listeners)."""
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Optional, Sequence, Tuple

import numpy as np
import srsly
from thinc.api import get_array_module
from thinc.types import Floats2d, Floats3d
from thinc.util import to_numpy

from .bilm.scalar_mix import mix_layers, softmax_weights

Segments = Tuple[Tuple[int, int], ...]
_MSGPACK_KEY = "__spacy_elmo_output__"


@dataclass(eq=False)
class ElmoOutput:
    """All biLM layers of one Doc.

    layers (Floats3d): (L+1, n_tokens, width). Layer 0 is the context-free token
        encoding (duplicated to the full width), layer j the j-th LSTM layer
        [forward ; backward]. On ``doc._.elmo`` it is a float32 numpy array on CPU;
        in the outputs handed to listeners during training it lives on the model's
        device (numpy or cupy).
    segments (Tuple[Tuple[int, int], ...]): the [start, end) token ranges that ran
        through the biLM as separate sentences (each with its own <S> and </S>):
        context never crosses a segment edge.
    mix_weights (Tuple[float, ...]): pre-softmax layer weights of the component's own
        mix; empty means equal weights (the mean of the layers).
    gamma (float): scale of the component's mix.
    layer_means (Optional[Floats2d]): (L+1, width) means the component's mix takes off each
        layer before mixing (the model's vector setting, ``bilm.VectorSetting``); None: nothing.
    vector_hooks (bool): the component made the Doc's ``.vector`` and ``.similarity`` use the mix.
        Hooks are not serialized: ``extensions.restore_vector_hooks`` puts them back on Docs read
        from bytes (DocBin, ``nlp.pipe(n_process=...)``) where this is True.
    """

    layers: Floats3d
    segments: Segments = ()
    mix_weights: Tuple[float, ...] = ()
    gamma: float = 1.0
    vector_hooks: bool = False
    layer_means: Optional[Floats2d] = None
    _mixed: Optional[Floats2d] = field(default=None, init=False, repr=False)

    def settle_on_doc(
        self,
        *,
        mix_weights: Tuple[float, ...],
        gamma: float,
        vector_hooks: bool,
        layer_means: Optional[Floats2d] = None,
    ) -> "ElmoOutput":
        """Make this output, as the model returned it, what ``doc._.elmo`` holds: the layers as
        float32 numpy on CPU (no copy when they are already), and the component's mix settings.

        RETURNS (ElmoOutput): this same object (never a second construction of the Doc's data).
        """
        self.layers = np.ascontiguousarray(to_numpy(self.layers), dtype=np.float32)
        self.mix_weights, self.gamma, self.vector_hooks = tuple(mix_weights), float(gamma), vector_hooks
        self.layer_means = layer_means
        self._mixed = None
        return self

    @property
    def n_layers(self) -> int:
        return int(self.layers.shape[0])

    @property
    def width(self) -> int:
        return int(self.layers.shape[2])

    def __len__(self) -> int:
        return int(self.layers.shape[1])

    def mix(self, weights: Optional[Sequence[float]] = None, gamma: Optional[float] = None) -> Floats2d:
        """gamma * sum_j softmax(weights)_j * (layers[j] - layer_means[j]), shape (n_tokens, width)
        (without ``layer_means``, nothing is taken off).

        weights (Optional[Sequence[float]]): pre-softmax weights, one per layer (-inf leaves a
            layer out); defaults to ``mix_weights`` (equal weights when empty).
        gamma (Optional[float]): scale; defaults to ``gamma``.
        RETURNS (Floats2d): float32, on the same device as ``layers``.
        """
        xp = get_array_module(self.layers)
        weights = self.mix_weights if weights is None else tuple(weights)
        gamma = self.gamma if gamma is None else gamma
        normalized = softmax_weights(weights, self.n_layers, xp)
        mixed = mix_layers(self.layers, normalized, gamma, xp)
        if self.layer_means is not None:
            mixed = mixed - mix_layers(xp.asarray(self.layer_means)[:, None, :], normalized, gamma, xp)
        return mixed.astype("float32", copy=False)

    @property
    def mixed(self) -> Floats2d:
        """The component's own mix of the layers (computed once), shape (n_tokens, width)."""
        if self._mixed is None:
            self._mixed = self.mix()
        return self._mixed

    def to_dict(self) -> Dict[str, Any]:
        return {
            "layers": self.layers,
            "segments": [list(s) for s in self.segments],
            "mix_weights": list(self.mix_weights),
            "gamma": float(self.gamma),
            "vector_hooks": bool(self.vector_hooks),
            "layer_means": None if self.layer_means is None else np.asarray(to_numpy(self.layer_means), dtype=np.float32),
        }

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "ElmoOutput":
        return cls(
            layers=data["layers"],
            segments=tuple((int(s), int(e)) for s, e in data["segments"]),
            mix_weights=tuple(float(w) for w in data["mix_weights"]),
            gamma=float(data["gamma"]),
            vector_hooks=bool(data.get("vector_hooks", False)),
            layer_means=None if data.get("layer_means") is None else np.asarray(data["layer_means"], dtype=np.float32),
        )


# Doc.to_bytes (used by DocBin and by nlp.pipe(n_process=...)) msgpacks doc.user_data,
# where doc._.elmo lives: teach srsly's msgpack to write and read ElmoOutput.
def _encode_elmo_output(obj: Any, chain: Optional[Callable[[Any], Any]] = None) -> Any:
    if isinstance(obj, ElmoOutput):
        data = obj.to_dict()
        data["layers"] = np.ascontiguousarray(to_numpy(obj.layers))
        return {_MSGPACK_KEY: data}
    return obj if chain is None else chain(obj)


def _decode_elmo_output(obj: Any, chain: Optional[Callable[[Any], Any]] = None) -> Any:
    if isinstance(obj, dict) and _MSGPACK_KEY in obj:
        return ElmoOutput.from_dict(obj[_MSGPACK_KEY])
    return obj if chain is None else chain(obj)


srsly.msgpack_encoders.register("spacy_elmo.ElmoOutput", func=_encode_elmo_output)
srsly.msgpack_decoders.register("spacy_elmo.ElmoOutput", func=_decode_elmo_output)
