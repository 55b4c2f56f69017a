"""Registered, versioned model builders. A released version is never changed in place."""
import copy
import inspect
from dataclasses import asdict
from typing import Any, Dict, List, Optional, Sequence

from spacy.language import Language
from spacy.tokens import Doc
from spacy.util import registry
from thinc.api import Maxout, Model, chain, with_array
from thinc.types import Floats2d, Floats3d

from .bilm import BiLM, BiLMConfig
from .bilm.batching import MAX_WINDOW
from .bilm.config import SMALL
from .data_classes import ElmoOutput
from .fast import DEFAULT_CHAR_CACHE_SIZE
from .initial_weights import initial_bilm, pack_bilm, unpack_bilm
from .layers import ElmoBiLM, InferencePlan
from .layers.listener import ElmoListener
from .layers.mix import ElmoMix, mix_like
from .layers.standalone import StandaloneElmo, replace_listener
from .layers.tok2vec import ElmoTok2Vec

BILM_ARCHITECTURE = "spacy-elmo.BiLM.v3"
# the versions of the biLM architecture that take the biLM's shape as arguments, oldest first
SHAPED_BILM_ARCHITECTURES = ("spacy-elmo.BiLM.v1", "spacy-elmo.BiLM.v2")
LISTENER_ARCHITECTURE = "spacy-elmo.ElmoListener.v1"
STANDALONE_ARCHITECTURE = "spacy-elmo.StandaloneElmo.v1"
TOK2VEC_ARCHITECTURE = "spacy-elmo.ElmoTok2Vec.v1"
# what a spacy-elmo.BiLM.v3 model holds until its weights are loaded: the smallest biLM there is
UNLOADED = BiLMConfig(char_embedding_dim=1, filters=((1, 1),), n_highway=0, dim=1, projection_dim=1, n_layers=1)


def bilm_shape(config: BiLMConfig) -> Dict[str, Any]:
    """The shape arguments of ``spacy-elmo.BiLM.v1`` and ``.v2`` (the fields of ``BiLMConfig``), as config values."""
    shape = asdict(config)
    shape["filters"] = [list(f) for f in config.filters]
    return shape


def bilm_model_config(config: BiLMConfig, **settings: Any) -> Dict[str, Any]:
    """A ``[components.elmo.model]`` block that builds a biLM of this shape (``spacy-elmo.BiLM.v2``).

    settings: other arguments of the architecture (max_window, batch_size, optimize, ...).
    """
    return {"@architectures": SHAPED_BILM_ARCHITECTURES[-1], **bilm_shape(config), **settings}


def record_shape(nlp: Language, name: str, config: BiLMConfig) -> None:
    """Write a biLM shape into the pipeline's config of the component ``name`` (its
    ``[components.NAME.model]`` block, when that block builds ``spacy-elmo.BiLM.v1`` or ``.v2``,
    which take the shape as arguments); the other settings of the block are kept. A
    ``spacy-elmo.BiLM.v3`` block names its source instead and is left as it is."""
    try:
        block = nlp.get_pipe_config(name).get("model")
    except ValueError:
        return
    if isinstance(block, dict) and block.get("@architectures") in SHAPED_BILM_ARCHITECTURES:
        block.update(bilm_shape(config))


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
    max_window: int = MAX_WINDOW,
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
        layers per sentence/window, so that `spacy train` runs the biLM once per training sentence
        and once per dev sentence rather than every epoch and evaluation, and repeated texts skip
        it at prediction; 0 disables. A full cache keeps what it holds against a sentence looked up
        about as often (epochs over a larger corpus then hit about bound / corpus), and warns once
        with the size that would hold what it was asked for (``layers.frozen_cache``). Hits equal
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
    frozen_cache_mb: Optional[float],
    inference: Optional[InferencePlan],
    source: Optional[str] = None,
    threads: Optional[int] = None,
    **shape: Any,
) -> Model[List[Doc], List[ElmoOutput]]:
    """The model of the biLM architectures (their arguments: the shape, the fields of
    ``BiLMConfig``, or ``source``, the name of where the weights come from; the batching;
    ``inference`` and ``threads``: see ``ElmoBiLM``). Its ``replace_listener`` and ``replace_listener_cfg`` attrs
    are spaCy's hooks for ``nlp.replace_listeners`` (spacy-transformers' contract)."""
    config = BiLMConfig(**{**shape, "filters": tuple(tuple(f) for f in shape["filters"])}) if shape else UNLOADED
    model = ElmoBiLM(
        BiLM(config).eval(),
        max_window=max_window,
        batch_size=batch_size,
        max_batch_items=max_batch_items,
        trainable=trainable,
        frozen_cache_mb=frozen_cache_mb,
        inference=inference,
        threads=threads,
        serialize_bilm=pack_bilm,
        deserialize_bilm=unpack_bilm,
    )
    if not shape:
        # the shape is the source's, known once its weights are loaded (or read from saved bytes)
        model.set_dim("nO", None, force=True)
    model.attrs["source"] = source
    model.attrs["replace_listener"] = replace_listener
    model.attrs["replace_listener_cfg"] = replace_listener_cfg
    return model


@registry.architectures("spacy-elmo.BiLM.v2")
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
    settings = {"optimize": optimize, "precision": precision, "char_cache_size": char_cache_size}
    return _bilm_model(**arguments.arguments, inference=_inference_plan("spacy-elmo.BiLM.v2", **settings))


def _v1_and_settings_signature() -> inspect.Signature:
    """v2's signature as spaCy reads it to fill and check a config: v1's arguments (written once,
    in ``bilm_v1``) followed by v2's own three."""
    v1 = inspect.signature(bilm_v1).parameters.values()
    own = [p for p in inspect.signature(bilm_v2).parameters.values() if p.kind is inspect.Parameter.KEYWORD_ONLY]
    return inspect.signature(bilm_v2).replace(parameters=[*v1, *own])


bilm_v2.__signature__ = _v1_and_settings_signature()  # type: ignore[attr-defined]


@registry.architectures(BILM_ARCHITECTURE)
def bilm_v3(
    *,
    name: Optional[str] = None,
    max_window: int = MAX_WINDOW,
    batch_size: int = 128,
    max_batch_items: Optional[int] = 4096,
    trainable: bool = False,
    frozen_cache_mb: Optional[float] = None,
    optimize: bool = True,
    precision: str = "fp32",
    char_cache_size: int = DEFAULT_CHAR_CACHE_SIZE,
    threads: int = 0,
) -> Model[List[Doc], List[ElmoOutput]]:
    """A character-level biLM that maps Docs to all their biLM layers, loaded from the source it names.

    name (Optional[str]): where the weights come from, anything ``spacy_elmo.load_bilm`` takes: a
        published model name ("small", "original", ...), a spacy-elmo model directory, a pipeline
        with an elmo component, a folder holding a published options/weights pair (under its own
        file names or AllenNLP's), a zip of a published model, ...; null: the English biLM shipped
        with the package. The biLM's shape is the source's. The weights are loaded at
        ``nlp.initialize()`` or at the first call, not when the pipeline is built, and saved with
        the pipeline: a saved pipeline loads its own weights, not the source's.
    frozen_cache_mb (Optional[float]): as for ``spacy-elmo.BiLM.v1``, with null (the default): a
        quarter of the memory available when the cache is first used. A full cache keeps a fixed
        share of a larger corpus (epochs do not thrash it) and says once, in a warning, the size
        that would hold every segment it was asked for, at the biLM's bytes a token (the layers x
        the width x 4: 3 KB for the published small model, 6 KB for medium, 12 KB for original).
    threads (int): torch threads for the biLM's own calls, set around each and put back after it,
        so the rest of the process keeps its setting; 0 (the default): one for every 2 million
        weights a timestep of an LSTM layer reads (5 x dim x projection_dim), at least one, at most
        the cores the process may use that the load left free when the biLM first ran
        (``layers.torch_threads``): one for the small and shipped biLMs, up to five for the
        published original; forked workers use one.
    The other arguments are those of ``spacy-elmo.BiLM.v2`` (batching, ``trainable``, and the
    inference settings ``optimize``, ``precision``, ``char_cache_size``), with its defaults.
    RETURNS (Model[List[Doc], List[ElmoOutput]]): the model.
    """
    inference = _inference_plan(
        BILM_ARCHITECTURE, optimize=optimize, precision=precision, char_cache_size=char_cache_size
    )
    return _bilm_model(
        max_window=max_window,
        batch_size=batch_size,
        max_batch_items=max_batch_items,
        trainable=trainable,
        frozen_cache_mb=frozen_cache_mb,
        inference=inference,
        source=name,
        threads=threads,
    )


def _inference_plan(architecture: str, **settings: Any) -> InferencePlan:
    """The inference settings of a biLM architecture, checked (an error names the architecture)."""
    try:
        return InferencePlan(**settings, from_architecture=True)
    except ValueError as err:
        raise ValueError(f"[{architecture}] {err}") from None


@registry.architectures(LISTENER_ARCHITECTURE)
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
    return _then_mix(listener, layer_norm=layer_norm, dropout=dropout, layer_dropout=layer_dropout, l2=l2)


def _then_mix(layers: Model[List[Doc], List[Floats3d]], **mix_settings: Any) -> Model[List[Doc], List[Floats2d]]:
    """``layers`` (Docs -> biLM layers) and the component's own ``ElmoMix`` of them, with the refs
    "listener" and "mix" that ``spacy-elmo.ElmoTok2Vec.v1`` takes apart."""
    mix = ElmoMix(**mix_settings)
    model = chain(layers, mix)
    model.set_ref("listener", layers)
    model.set_ref("mix", mix)
    return model


@registry.architectures(STANDALONE_ARCHITECTURE)
def standalone_elmo_v1(
    *, bilm: Model[List[Doc], List[ElmoOutput]], grad_factor: float = 1.0, **mix_settings: Any
) -> Model[List[Doc], List[Floats2d]]:
    """``spacy-elmo.ElmoListener.v1`` with the component's own biLM in place of the listener: what
    ``nlp.replace_listeners`` makes of a listening component (its config is written by
    ``replace_listener_cfg``, its weights saved with the component), or a component that needs no
    `elmo` component.

    bilm (Model): built by a ``spacy-elmo.BiLM`` architecture; its weights load when the component
        is initialized or first called, unless they come from a saved pipeline.
    grad_factor (float): scale of the gradient sent into the biLM (only fine-tuned when ``bilm``
        has ``trainable = true``).
    mix_settings: ``layer_norm``, ``dropout``, ``layer_dropout`` and ``l2``, as for
        ``spacy-elmo.ElmoListener.v1`` (with its defaults).
    RETURNS (Model[List[Doc], List[Floats2d]]): per Doc (n_tokens, biLM width).
    """
    source = bilm.attrs["source"]
    own = StandaloneElmo(bilm, grad_factor=grad_factor, load_bilm=lambda: initial_bilm(source=source))
    return _then_mix(own, **mix_settings)


def _standalone_signature() -> inspect.Signature:
    """The signature spaCy reads to fill and check a config: ``bilm``, then the listener's
    arguments but ``upstream``, with their defaults (written once, in ``elmo_listener_v1``)."""
    listener = [p for name, p in inspect.signature(elmo_listener_v1).parameters.items() if name != "upstream"]
    bilm = inspect.signature(standalone_elmo_v1).parameters["bilm"]
    return inspect.signature(standalone_elmo_v1).replace(parameters=[bilm, *listener])


standalone_elmo_v1.__signature__ = _standalone_signature()  # type: ignore[attr-defined]


def replace_listener_cfg(bilm_block: Dict[str, Any], tok2vec_block: Dict[str, Any]) -> Dict[str, Any]:
    """spaCy's ``replace_listener_cfg`` hook: the config that builds a listening component's model
    with its own biLM (``spacy-elmo.StandaloneElmo.v1`` in place of ``spacy-elmo.ElmoListener.v1``).

    bilm_block (Dict[str, Any]): the `elmo` component's model block.
    tok2vec_block (Dict[str, Any]): the component's ``model.tok2vec`` block: an
        ``spacy-elmo.ElmoTok2Vec.v1`` block with its listener under ``elmo``, or the listener's own.
    RETURNS (Dict[str, Any]): the block to put where the listener's was.
    """

    def standalone(listener_block: Dict[str, Any]) -> Dict[str, Any]:
        settings = {key: value for key, value in listener_block.items() if key not in ("@architectures", "upstream")}
        return {"@architectures": STANDALONE_ARCHITECTURE, "bilm": copy.deepcopy(dict(bilm_block)), **settings}

    if tok2vec_block.get("@architectures") == LISTENER_ARCHITECTURE:
        return standalone(tok2vec_block)
    elmo = tok2vec_block.get("elmo")
    if tok2vec_block.get("@architectures") == TOK2VEC_ARCHITECTURE and isinstance(elmo, dict):
        return {**copy.deepcopy(dict(tok2vec_block)), "elmo": standalone(elmo)}
    raise ValueError(
        f"Cannot replace the elmo listener of a model.tok2vec block built by {tok2vec_block.get('@architectures')!r}: "
        f"replace_listeners knows {LISTENER_ARCHITECTURE} and {TOK2VEC_ARCHITECTURE} (with its listener under 'elmo')"
    )


@registry.architectures(TOK2VEC_ARCHITECTURE)
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
