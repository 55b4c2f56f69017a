"""Registered, versioned model builders. A released version is never changed in place."""
import inspect
from dataclasses import asdict
from typing import Any, Dict, List, Optional, Sequence

from spacy.tokens import Doc
from spacy.util import registry
from thinc.api import Maxout, Model, chain, with_array
from thinc.types import Floats2d

from .bilm import BiLM, BiLMConfig
from .bilm.config import SMALL
from .data_classes import ElmoOutput
from .fast import DEFAULT_CHAR_CACHE_SIZE
from .layers import ElmoBiLM, InferencePlan
from .layers.listener import ElmoListener
from .layers.mix import ElmoMix, mix_like
from .layers.tok2vec import ElmoTok2Vec

BILM_ARCHITECTURE = "spacy-elmo.BiLM.v2"
# every version of the biLM architecture, oldest first: they take the same shape arguments
BILM_ARCHITECTURES = ("spacy-elmo.BiLM.v1", BILM_ARCHITECTURE)


def bilm_shape(config: BiLMConfig) -> Dict[str, Any]:
    """The shape arguments of the biLM architectures (the fields of ``BiLMConfig``), as config values."""
    shape = asdict(config)
    shape["filters"] = [list(f) for f in config.filters]
    return shape


def bilm_model_config(config: BiLMConfig, **settings: Any) -> Dict[str, Any]:
    """The ``[components.elmo.model]`` block that builds a biLM of this shape (``spacy-elmo.BiLM.v2``).

    settings: other arguments of the architecture (max_window, batch_size, optimize, ...).
    """
    return {"@architectures": BILM_ARCHITECTURE, **bilm_shape(config), **settings}


@registry.architectures("spacy-elmo.BiLM.v1")
def bilm_v1(
    *,
    char_embedding_dim: int = SMALL.char_embedding_dim,
    filters: Sequence[Sequence[int]] = SMALL.filters,
    n_highway: int = SMALL.n_highway,
    activation: str = SMALL.activation,
    n_characters: int = SMALL.n_characters,
    max_characters_per_token: int = SMALL.max_characters_per_token,
    dim: int = SMALL.dim,
    projection_dim: int = SMALL.projection_dim,
    n_layers: int = SMALL.n_layers,
    cell_clip: Optional[float] = SMALL.cell_clip,
    proj_clip: Optional[float] = SMALL.proj_clip,
    use_skip_connections: bool = SMALL.use_skip_connections,
    max_window: int = 200,
    batch_size: int = 128,
    max_batch_items: Optional[int] = 4096,
    trainable: bool = False,
    frozen_cache_mb: float = 512,
) -> Model[List[Doc], List[ElmoOutput]]:
    """A character-level biLM (randomly initialized) that maps Docs to all their biLM layers.

    The shape arguments are the fields of the published options JSON (see ``BiLMConfig``);
    the defaults are the published "small" model (``bilm.config.SMALL``, 2x1024_128_2048cnn_1xhighway). Weights
    imported at ``nlp.initialize()`` bring their own shape, which replaces this one and is
    saved with the pipeline.

    max_window (int): most tokens run through the biLM as one sentence. Docs with sentence
        boundaries run sentence by sentence; longer sentences, and Docs without boundaries,
        are cut into consecutive windows of this many tokens, each with its own <S> and </S>
        (context does not cross a window edge).
    batch_size (int): most sentences/windows per forward pass.
    max_batch_items (Optional[int]): most padded positions per forward pass (null: no cap).
        Larger batches run faster (README "Speed": 128 sentences of ~27 tokens, the default,
        match one forward pass over all of them; 32 reach 80%), at the cost of activation
        memory: the input projections take 32 KiB per position with the small model
        and 128 KiB with the full one (4096 positions: 128 MiB and 512 MiB; an optimized biLM
        leaves out padding and keeps that buffer between calls). Lower it for the full model on small machines.
    trainable (bool): let gradients from listeners fine-tune the biLM (default: frozen).
    frozen_cache_mb (float): while the biLM is frozen, keep up to this many megabytes of its
        layers per sentence/window (least recently used dropped first), so that `spacy train`
        runs the biLM once per training sentence and once per dev sentence rather than every
        epoch and evaluation, and repeated texts skip it at prediction; 0 disables. Hits equal
        recomputation to within 1e-5. (The published small model's layers take 3 KB a token.)
    RETURNS (Model[List[Doc], List[ElmoOutput]]): the model.

    Its inference settings come from the elmo component's arguments (``optimize``, ``precision``,
    ``char_cache_size``); ``spacy-elmo.BiLM.v2`` holds them itself. Kept to load pipelines saved
    with it.
    """
    return _bilm_model(**locals(), inference=None)  # locals(): the arguments


def _bilm_model(
    *,
    max_window: int,
    batch_size: int,
    max_batch_items: Optional[int],
    trainable: bool,
    frozen_cache_mb: float,
    inference: Optional[InferencePlan],
    **shape: Any,
) -> Model[List[Doc], List[ElmoOutput]]:
    """The model of the biLM architectures (their arguments: the shape, the fields of
    ``BiLMConfig``, and the batching; ``inference``: see ``ElmoBiLM``)."""
    config = BiLMConfig(**{**shape, "filters": tuple(tuple(f) for f in shape["filters"])})
    return ElmoBiLM(
        BiLM(config).eval(),
        max_window=max_window,
        batch_size=batch_size,
        max_batch_items=max_batch_items,
        trainable=trainable,
        frozen_cache_mb=frozen_cache_mb,
        inference=inference,
    )


@registry.architectures(BILM_ARCHITECTURE)
def bilm_v2(
    *,
    optimize: bool = True,
    precision: str = "fp32",
    char_cache_size: int = DEFAULT_CHAR_CACHE_SIZE,
    **v1_arguments: Any,
) -> Model[List[Doc], List[ElmoOutput]]:
    """``spacy-elmo.BiLM.v1`` (the same arguments and defaults) plus the settings of how predictions
    run, which belong to the model: applied to whichever weights it holds (imported, loaded,
    fine-tuned) once per version of them, before a prediction. Training a trainable biLM always runs
    the plain float32 computation.

    optimize (bool): prepare the biLM for fast inference before predicting: both LSTM directions
        step in lockstep on re-laid-out (not changed) weights, plus the two settings below (outputs
        change by float32 rounding only, at most a few 1e-6). False runs the biLM exactly as loaded.
    precision (str): "fp32" (the default), or a reduced-precision fast mode for prediction only:
        "int8" (dynamic quantization, CPU; about 2x faster on the full model, cosine to fp32
        0.9997), "fp16" (float16 weights, CPU) or "bf16" (CPUs with AVX512-BF16/AMX, GPUs).
        Needs ``optimize``.
    char_cache_size (int): keep the char-CNN encodings of up to this many recently seen tokens
        (least recently used dropped first; 0: none). About 2.5 KB a token with the full
        published model, 1 KB with the small one. Needs ``optimize``.
    v1_arguments: the arguments of ``spacy-elmo.BiLM.v1``, each with v1's default.
    RETURNS (Model[List[Doc], List[ElmoOutput]]): the model.
    """
    arguments = inspect.signature(bilm_v1).bind(**v1_arguments)  # a name v1 lacks is a TypeError
    arguments.apply_defaults()
    try:
        inference = InferencePlan(
            optimize=optimize, precision=precision, char_cache_size=char_cache_size, from_architecture=True
        )
    except ValueError as err:
        raise ValueError(f"[{BILM_ARCHITECTURE}] {err}") from None
    return _bilm_model(**arguments.arguments, inference=inference)


def _v1_and_settings_signature() -> inspect.Signature:
    """v2's signature as spaCy reads it to fill and check a config: v1's arguments (written once,
    in ``bilm_v1``) followed by v2's own three."""
    v1 = inspect.signature(bilm_v1).parameters.values()
    own = [p for p in inspect.signature(bilm_v2).parameters.values() if p.kind is inspect.Parameter.KEYWORD_ONLY]
    return inspect.signature(bilm_v2).replace(parameters=[*v1, *own])


bilm_v2.__signature__ = _v1_and_settings_signature()  # type: ignore[attr-defined]


@registry.architectures("spacy-elmo.ElmoListener.v1")
def elmo_listener_v1(
    *,
    upstream: str = "*",
    grad_factor: float = 1.0,
    layer_norm: bool = False,
    dropout: float = 0.0,
    layer_dropout: float = 0.0,
    l2: float = 0.0,
) -> Model[List[Doc], List[Floats2d]]:
    """A downstream component's ELMo: the upstream `elmo` component's layers, mixed with the
    component's own learned softmax weights and gamma (ELMo_k of the paper).

    upstream (str): name of the `elmo` component, or "*" for any.
    grad_factor (float): scale of the gradient sent into the biLM; it is only fine-tuned when
        the elmo component's model has ``trainable = true`` (feature-based by default).
    layer_norm (bool): normalize each layer over the Doc before mixing.
    dropout (float): dropout on the mixed vectors (not changed by ``[training] dropout``).
    layer_dropout (float): probability of dropping a whole layer from the mix during training.
    l2 (float): L2 penalty on the pre-softmax layer weights.
    RETURNS (Model[List[Doc], List[Floats2d]]): per Doc (n_tokens, biLM width).
    """
    listener = ElmoListener(upstream, grad_factor=grad_factor)
    mix = ElmoMix(layer_norm=layer_norm, dropout=dropout, layer_dropout=layer_dropout, l2=l2)
    model = chain(listener, mix)
    model.set_ref("listener", listener)
    model.set_ref("mix", mix)
    return model


@registry.architectures("spacy-elmo.ElmoTok2Vec.v1")
def elmo_tok2vec_v1(
    *,
    elmo: Model[List[Doc], List[Floats2d]],
    embed: Optional[Model[List[Doc], List[Floats2d]]] = None,
    encode: Optional[Model[Floats2d, Floats2d]] = None,
    elmo_input: bool = True,
    elmo_output: bool = False,
) -> Model[List[Doc], List[Floats2d]]:
    """A tok2vec with ELMo where the paper puts it: [x_k ; ELMo_k] into the encoder and/or
    [h_k ; ELMo_k] out of it, x_k being a classic embedding (e.g. spacy.MultiHashEmbed.v2).

    elmo (Model): built by "spacy-elmo.ElmoListener.v1"; with both ``elmo_input`` and
        ``elmo_output`` the output gets a second mix with the same settings (its own weights).
    embed (Optional[Model]): the classic embedding, or None for ELMo alone at the input.
    encode (Optional[Model[Floats2d, Floats2d]]): the context encoder (e.g.
        spacy.MaxoutWindowEncoder.v2), or None. With ELMo at the input, a Maxout layer
        projects [x_k ; ELMo_k] to the encoder's width first.
    elmo_input (bool): concatenate ELMo with the embedding before the encoder.
    elmo_output (bool): concatenate ELMo with the encoder's output.
    RETURNS (Model[List[Doc], List[Floats2d]]): per Doc (n_tokens, width).
    """
    listener, mix = elmo.get_ref("listener"), elmo.get_ref("mix")
    if elmo_input and elmo_output:
        input_mix, output_mix = mix, mix_like(mix)
    elif elmo_input:
        input_mix, output_mix = mix, None
    else:
        input_mix, output_mix = None, mix
    if encode is not None:
        # The Docs of a batch run as one array: they need the encoder's receptive field of padding
        # between them, or a window encoder's edge tokens see the neighbouring Doc. spaCy's window
        # encoders are with_array layers padded by their receptive field ("pad"). (Pipelines saved
        # before this keep the padding they were trained with: attrs are saved with the model.)
        receptive_field = encode.attrs.get("pad", 0)
        if input_mix is not None:
            encode = chain(Maxout(nO=encode.get_dim("nO"), nP=3, normalize=True), encode)
        encode = with_array(encode, pad=receptive_field)
    return ElmoTok2Vec(listener, input_mix, output_mix, embed, encode)
