"""The hyper-parameters of a biLM, read from and written to the published options JSON."""
from dataclasses import asdict, dataclass
from typing import Any, Dict, Optional, Tuple

ACTIVATIONS = ("relu", "tanh")


@dataclass(frozen=True)
class BiLMConfig:
    """Architecture of a character-level biLM (the fields of AllenNLP/bilm-tf's options.json).

    The defaults are the published "original" model (``ORIGINAL``); ``SMALL`` is the published
    "small" one, the default shape of the ``spacy-elmo.BiLM`` architectures.

    char_embedding_dim (int): width of the character embedding.
    filters (List[Tuple[int, int]]): (width, number of filters) of each convolution.
    n_highway (int): number of highway layers after the convolutions.
    activation (str): "relu" or "tanh", applied after max-pooling each convolution.
    n_characters (int): size of the character vocabulary: 262 for the byte ids of the published
        models (``chars.py``), a learned vocabulary's size otherwise (``BiLM(char_vocab=...)``).
    max_characters_per_token (int): characters per token incl. begin/end-of-word marks.
    dim (int): LSTM cell size.
    projection_dim (int): LSTM output (projection) size; layer width is 2 * projection_dim.
    n_layers (int): LSTM layers per direction (>= 1).
    cell_clip (Optional[float]): clip the cell to [-cell_clip, cell_clip]; None disables.
    proj_clip (Optional[float]): clip the projected output; None disables.
    use_skip_connections (bool): residual connection between LSTM layers.
    """

    char_embedding_dim: int = 16
    filters: Tuple[Tuple[int, int], ...] = ((1, 32), (2, 32), (3, 64), (4, 128), (5, 256), (6, 512), (7, 1024))
    n_highway: int = 2
    activation: str = "relu"
    n_characters: int = 262
    max_characters_per_token: int = 50
    dim: int = 4096
    projection_dim: int = 512
    n_layers: int = 2
    cell_clip: Optional[float] = 3.0
    proj_clip: Optional[float] = 3.0
    use_skip_connections: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "filters", tuple((int(w), int(n)) for w, n in self.filters))
        problems = []
        if self.activation not in ACTIVATIONS:
            problems.append(f"activation must be one of {ACTIVATIONS}, not {self.activation!r}")
        if self.n_layers < 1:
            problems.append(f"n_layers must be >= 1, not {self.n_layers}")
        if not self.filters or any(w < 1 or n < 1 for w, n in self.filters):
            problems.append(f"filters must be a non-empty list of positive [width, count] pairs: {self.filters}")
        if any(w > self.max_characters_per_token for w, _ in self.filters):
            problems.append("a filter is wider than max_characters_per_token")
        if self.max_characters_per_token < 3:
            problems.append("max_characters_per_token must be >= 3 (begin/end-of-word marks and one byte)")
        if self.n_characters < 1:
            problems.append(f"n_characters must be positive, not {self.n_characters}")
        for name in ("char_embedding_dim", "dim", "projection_dim"):
            if getattr(self, name) < 1:
                problems.append(f"{name} must be positive")
        if self.n_highway < 0:
            problems.append("n_highway must be >= 0")
        if problems:
            raise ValueError("Invalid biLM configuration: " + "; ".join(problems))

    @property
    def n_filters(self) -> int:
        return sum(n for _, n in self.filters)

    @property
    def output_dim(self) -> int:
        """Width of every output layer: forward and backward halves."""
        return 2 * self.projection_dim

    @property
    def n_output_layers(self) -> int:
        return self.n_layers + 1

    @classmethod
    def from_options(cls, options: Dict[str, Any]) -> "BiLMConfig":
        """Read the published options JSON (the dict), raising ValueError on missing keys."""
        try:
            lstm = options["lstm"]
            cnn = options["char_cnn"]
            return cls(
                char_embedding_dim=int(cnn["embedding"]["dim"]),
                filters=tuple(tuple(f) for f in cnn["filters"]),
                n_highway=int(cnn["n_highway"]),
                activation=cnn.get("activation", "relu"),
                n_characters=int(cnn.get("n_characters", 262)),
                max_characters_per_token=int(cnn.get("max_characters_per_token", 50)),
                dim=int(lstm["dim"]),
                projection_dim=int(lstm["projection_dim"]),
                n_layers=int(lstm["n_layers"]),
                cell_clip=_optional_clip(lstm.get("cell_clip")),
                proj_clip=_optional_clip(lstm.get("proj_clip")),
                use_skip_connections=bool(lstm.get("use_skip_connections", True)),
            )
        except (KeyError, TypeError) as err:
            raise ValueError(f"options are missing or have a malformed field: {err!r}") from err

    def to_options(self) -> Dict[str, Any]:
        """Write the published options JSON layout (as bilm-tf and AllenNLP read it)."""
        lstm: Dict[str, Any] = {
            "use_skip_connections": self.use_skip_connections,
            "projection_dim": self.projection_dim,
            "dim": self.dim,
            "n_layers": self.n_layers,
        }
        if self.cell_clip is not None:
            lstm["cell_clip"] = self.cell_clip
        if self.proj_clip is not None:
            lstm["proj_clip"] = self.proj_clip
        return {
            "lstm": lstm,
            "char_cnn": {
                "activation": self.activation,
                "filters": [list(f) for f in self.filters],
                "n_highway": self.n_highway,
                "embedding": {"dim": self.char_embedding_dim},
                "n_characters": self.n_characters,
                "max_characters_per_token": self.max_characters_per_token,
            },
        }

    def replace(self, **changes: Any) -> "BiLMConfig":
        values = asdict(self)
        values.update(changes)
        return BiLMConfig(**values)


def _optional_clip(value: Any) -> Optional[float]:
    # bilm-tf writes 0 or omits the key for "no clipping"
    if value is None or float(value) <= 0:
        return None
    return float(value)


# The published shapes by name (io/registry.py says where their files are).
ORIGINAL = BiLMConfig()  # 2x4096_512_2048cnn_2xhighway
SMALL = BiLMConfig(n_highway=1, dim=1024, projection_dim=128)  # 2x1024_128_2048cnn_1xhighway
