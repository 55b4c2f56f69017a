"""Registered, versioned model builders. A released version is never changed in place."""
from typing import List, Optional, Sequence

from spacy.tokens import Doc
from spacy.util import registry
from thinc.api import Model

from .bilm import BiLM, BiLMConfig
from .data_classes import ElmoOutput
from .layers import ElmoBiLM


@registry.architectures("spacy-elmo.BiLM.v1")
def bilm_v1(
    *,
    char_embedding_dim: int = 16,
    filters: Sequence[Sequence[int]] = ((1, 32), (2, 32), (3, 64), (4, 128), (5, 256), (6, 512), (7, 1024)),
    n_highway: int = 1,
    activation: str = "relu",
    n_characters: int = 262,
    max_characters_per_token: int = 50,
    dim: int = 1024,
    projection_dim: int = 128,
    n_layers: int = 2,
    cell_clip: Optional[float] = 3.0,
    proj_clip: Optional[float] = 3.0,
    use_skip_connections: bool = True,
    max_window: int = 200,
    batch_size: int = 32,
    max_batch_items: Optional[int] = 1024,
    trainable: bool = False,
) -> Model[List[Doc], List[ElmoOutput]]:
    """A character-level biLM (randomly initialized) that maps Docs to all their biLM layers.

    The shape arguments are the fields of the published options JSON (see ``BiLMConfig``);
    the defaults are the published "small" model (2x1024_128_2048cnn_1xhighway). Weights
    imported at ``nlp.initialize()`` bring their own shape, which replaces this one and is
    saved with the pipeline.

    max_window (int): most tokens run through the biLM as one sentence. Docs with sentence
        boundaries run sentence by sentence; longer sentences, and Docs without boundaries,
        are cut into consecutive windows of this many tokens, each with its own <S> and </S>
        (context does not cross a window edge).
    batch_size (int): most sentences/windows per forward pass.
    max_batch_items (Optional[int]): most padded positions per forward pass (null: no cap).
    trainable (bool): let gradients from listeners fine-tune the biLM (default: frozen).
    RETURNS (Model[List[Doc], List[ElmoOutput]]): the model.
    """
    config = BiLMConfig(
        char_embedding_dim=char_embedding_dim,
        filters=tuple(tuple(f) for f in filters),
        n_highway=n_highway,
        activation=activation,
        n_characters=n_characters,
        max_characters_per_token=max_characters_per_token,
        dim=dim,
        projection_dim=projection_dim,
        n_layers=n_layers,
        cell_clip=cell_clip,
        proj_clip=proj_clip,
        use_skip_connections=use_skip_connections,
    )
    return ElmoBiLM(
        BiLM(config).eval(),
        max_window=max_window,
        batch_size=batch_size,
        max_batch_items=max_batch_items,
        trainable=trainable,
    )
