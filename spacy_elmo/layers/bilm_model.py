"""Docs -> biLM -> one ElmoOutput per Doc: the thinc model around the torch BiLM.

The torch module sits in thinc's ``PyTorchWrapper_v2`` and knows nothing of thinc;
this layer cuts Docs into segments (``doc_segments``), batches them by length
(``plan_batches``), runs the wrapper once per batch, and reassembles each Doc's
layers. Outputs are arrays of the model's ops (numpy, or cupy under
``spacy.require_gpu``); the torch module runs on the device of its parameters.

The layer keeps an ``InferencePlan`` (``optimize``, ``precision`` and ``char_cache_size`` of the
``spacy-elmo.BiLM.v2`` architecture, or, for pipelines built with v1, of the elmo component) and
leaves every decision about how the biLM runs to ``spacy_elmo.fast.plan``: ``adopt`` when a biLM is
set, ``prepare_pass`` before each pass (the settings are applied when the weights are set or change,
not at every call; training a trainable biLM runs the plain layout).

Each forward pass asks once whether the weights changed (``weights_version``, a walk over every
parameter and buffer) and hands the answer to both the plan and the frozen layer cache: one walk per
batch, two when the settings are applied anew (the pairing they do replaces weight tensors, so the
key is taken again), none for a training step of a trainable biLM without the frozen cache. (The
char-CNN cache and the reduced-precision copies check their own few tensors.)

A frozen biLM's layers depend on nothing but a segment's words, so ``spacy train`` would
recompute the same layers every epoch and at every dev evaluation: a frozen model keeps them
in a bounded cache that epochs cannot thrash (``FrozenCache``), for training and prediction alike
(so a second timing over the same texts measures the cache, not the biLM).
"""
import copy
from typing import Any, Callable, List, Optional, Sequence, Tuple

import numpy as np
import torch
from spacy.tokens import Doc
from thinc.api import ArgsKwargs, Model, PyTorchWrapper_v3, torch2xp, xp2torch
from thinc.model import deserialize_attr, serialize_attr
from thinc.types import Floats3d

from ..bilm import BiLM, plan_batches
from ..data_classes import ElmoOutput
from ..fast import forget_derived_weights
from ..fast.plan import InferencePlan, adopt, prepare_pass
from .frozen_cache import FrozenCache, WeightsVersion, frozen_weights_version
from .segments import doc_segments
from .torch_threads import resolve_threads, torch_threads

BatchInput = Tuple[np.ndarray, np.ndarray]
CACHE_ATTR = "frozen_cache"
INFERENCE_ATTR = "inference"
THREADS_ATTR = "threads"


@serialize_attr.register(InferencePlan)
def _serialize_plan(_: InferencePlan, value: InferencePlan, name: str, model: Model) -> bytes:
    return serialize_attr(value.precision.name, value.precision.name, name, model)


@deserialize_attr.register(InferencePlan)
def _deserialize_plan(current: InferencePlan, value: bytes, name: str, model: Model) -> InferencePlan:
    # the settings come from the config the model is built with, not from the saved bytes
    return copy.deepcopy(current)


def set_inference(model: Model, plan: InferencePlan) -> None:
    """Give a model built by ``ElmoBiLM`` its inference settings (see ``InferencePlan``); they take
    effect at the next prediction."""
    model.attrs[INFERENCE_ATTR] = plan


def apply_inference(model: Model) -> None:
    """Put a model's inference settings into effect now (a prediction does this itself)."""
    with torch_threads(model_threads(model)):
        model.attrs[INFERENCE_ATTR].apply(get_bilm(model))


def model_threads(model: Model) -> Optional[int]:
    """RETURNS (Optional[int]): the torch threads the biLM's calls run on: the model's ``threads``
    setting, or where it is 0 the rule of ``torch_threads.threads_for`` for the biLM it holds;
    None: the process's setting."""
    return resolve_threads(model.attrs.get(THREADS_ATTR), get_bilm(model).config)


def weights_updated(model: Model) -> None:
    """Tell a model built by ``ElmoBiLM`` that its biLM's weights were written in ways torch does not
    count (thinc's optimizers write through numpy views): every cache derived from them is dropped."""
    forget_derived_weights(get_bilm(model))
    model.attrs[CACHE_ATTR].clear()
    model.attrs[INFERENCE_ATTR].forget()


def bilm_weights_version(model: Model) -> WeightsVersion:
    """RETURNS (WeightsVersion): a key of the held biLM's weights that changes when they do (see
    ``frozen_cache.frozen_weights_version``): a frozen biLM saved under one key need not be written again."""
    return frozen_weights_version(get_bilm(model))


def clear_frozen_cache(model: Model) -> None:
    """Forget the cached layers of a model built by ``ElmoBiLM`` (after editing its weights by hand)."""
    model.attrs[CACHE_ATTR].clear()


def ElmoBiLM(
    bilm: BiLM,
    *,
    max_window: int,
    batch_size: int,
    max_batch_items: Optional[int],
    trainable: bool,
    frozen_cache_mb: Optional[float] = 0,
    inference: Optional[InferencePlan] = None,
    threads: Optional[int] = None,
    serialize_bilm: Optional[Callable[[BiLM], bytes]] = None,
    deserialize_bilm: Optional[Callable[[BiLM, bytes, Any], BiLM]] = None,
) -> Model[List[Doc], List[ElmoOutput]]:
    """Wrap a biLM as a thinc model from Docs to per-Doc layers.

    bilm (BiLM): the torch module (its weights may be replaced later with ``set_bilm``).
    max_window (int): most tokens per segment; longer sentences (or Docs without sentence
        boundaries) are cut into windows, each run as a sentence of its own.
    batch_size (int): most segments per forward pass.
    max_batch_items (Optional[int]): most padded positions (segments x longest, <S> and </S>
        included) per forward pass; a longer segment runs alone.
    trainable (bool): whether gradients flow into the biLM during training. When False,
        training-time forward passes run without a computation graph and backprop is a no-op.
    frozen_cache_mb (Optional[float]): megabytes of layers to keep per segment while the biLM is
        frozen, so that repeated segments (the training set every epoch, the dev set at every
        evaluation, repeated sentences at prediction) skip the biLM; 0 disables; None: a quarter
        of the memory available when it is first used (``FrozenCache``). A hit returns
        the stored values (equal to recomputing them to within 1e-5, as with other batch
        mates). Never used while ``trainable`` is True.
    inference (Optional[InferencePlan]): how predictions run; None: the plain computation until
        ``set_inference`` gives a plan (the elmo component does, from its arguments, for a model
        of ``spacy-elmo.BiLM.v1``).
    threads (Optional[int]): torch threads for the biLM's calls, set around each and put back after
        it (the rest of the process keeps its own); 0: chosen for the biLM by
        ``torch_threads.threads_for``; None: the process's setting, as it is (the biLM architectures
        before ``spacy-elmo.BiLM.v3``).
    serialize_bilm, deserialize_bilm: how ``model.to_bytes``/``from_bytes`` write and read the biLM
        (thinc's ``PyTorchShim`` callbacks; the deserializer returns the module to hold, in any
        shape); None: thinc's own (a pickled state dict, in the shape held).
    RETURNS (Model[List[Doc], List[ElmoOutput]]): layers of shape (L+1, n_tokens, width) per Doc.
    """
    if max_window < 1 or batch_size < 1 or (max_batch_items is not None and max_batch_items < 1):
        raise ValueError(
            f"max_window ({max_window}), batch_size ({batch_size}) and max_batch_items "
            f"({max_batch_items}) must be positive"
        )
    if threads is not None and threads < 0:
        raise ValueError(f"threads ({threads}) must be 0 (chosen for the model) or positive")
    if frozen_cache_mb is not None and frozen_cache_mb < 0:
        raise ValueError(
            f"frozen_cache_mb ({frozen_cache_mb}) must be 0 (no cache), positive, or null (a share of the memory)"
        )
    wrapper = PyTorchWrapper_v3(
        bilm,
        convert_inputs=_convert_inputs,
        convert_outputs=_convert_outputs,
        serialize_model=serialize_bilm,
        deserialize_model=deserialize_bilm,
    )
    model: Model[List[Doc], List[ElmoOutput]] = Model(
        "elmo_bilm",
        forward,
        layers=[wrapper],
        attrs={
            "max_window": max_window,
            "batch_size": batch_size,
            "max_batch_items": max_batch_items,
            "trainable": trainable,
            CACHE_ATTR: FrozenCache(None if frozen_cache_mb is None else int(frozen_cache_mb * 2**20)),
            INFERENCE_ATTR: inference if inference is not None else InferencePlan(),
            THREADS_ATTR: threads,
        },
        dims={"nO": None},
    )
    set_bilm(model, bilm)
    return model


def get_bilm(model: Model) -> BiLM:
    """The torch biLM inside a model built by ``ElmoBiLM``."""
    return model.layers[0].shims[0]._model


def set_bilm(model: Model, bilm: BiLM) -> None:
    """Put a biLM (any shape) into a model built by ``ElmoBiLM``, on the device of the one it replaces.

    Importers build a new module whose shape comes from the imported options, so the
    module is swapped rather than its weights copied.
    """
    if bilm.stateful:
        raise ValueError("the elmo component needs a stateless biLM (bilm.stateful = False)")
    shim = model.layers[0].shims[0]
    device = shim.device
    bilm.reset_states()
    adopt(bilm, model.attrs[INFERENCE_ATTR])
    shim._model = bilm.to(device)
    model.attrs[CACHE_ATTR].clear()
    model.set_dim("nO", bilm.config.output_dim, force=True)
    model.attrs["n_layers"] = bilm.config.n_output_layers


def forward(model: Model, docs: List[Doc], is_train: bool) -> Tuple[List[ElmoOutput], Callable]:
    bilm = get_bilm(model)
    threads = model_threads(model)
    segments = [tuple(doc_segments(doc, model.attrs["max_window"])) for doc in docs]
    words = [[token.text for token in doc] for doc in docs]
    flat = [(d, start, end) for d, doc_segs in enumerate(segments) for start, end in doc_segs]
    sentences = [words[d][start:end] for d, start, end in flat]
    with torch_threads(threads):
        trainable, cache = _prepare_bilm(model, bilm, is_train)
        pieces = _cached_pieces(cache, sentences)
        callbacks = _run_segments(model, sentences, pieces, cache, trainable)
    outputs = _doc_outputs(model, segments, pieces)

    def backprop(d_layers: Sequence[Floats3d]) -> List[Doc]:
        if not trainable:
            return []
        with torch_threads(threads):
            for batch, shape, lengths, backprop_batch in callbacks:
                d_batch = model.ops.alloc(shape, dtype="float32")
                for row, index in enumerate(batch):
                    d, start, end = flat[index]
                    d_batch[:, row, 1 : lengths[row] - 1] = d_layers[d][:, start:end]
                backprop_batch(d_batch)
        return []

    return outputs, backprop


def _prepare_bilm(model: Model, bilm: BiLM, is_train: bool) -> Tuple[bool, Optional[FrozenCache]]:
    """Have ``fast.plan`` lay the biLM out for this pass and check the layer cache against its
    weights, with the weights' version taken once for both.

    RETURNS (Tuple[bool, Optional[FrozenCache]]): whether gradients flow into the biLM, and the
    layer cache (None when it is not used).
    """
    trainable = is_train and model.attrs["trainable"]
    cache: FrozenCache = model.attrs[CACHE_ATTR]
    use_cache = cache.enabled and not model.attrs["trainable"]
    if not use_cache:
        # a trainable biLM's weights move: what was stored before may be stale
        cache.clear()
    version = prepare_pass(
        bilm, model.attrs[INFERENCE_ATTR], is_train=is_train, trains_weights=trainable, need_version=use_cache
    )
    if not use_cache:
        return trainable, None
    cache.check(bilm, version)
    cache.note_pass(is_train)
    return trainable, cache


def _cached_pieces(cache: Optional[FrozenCache], sentences: Sequence[List[str]]) -> List[Any]:
    """Each segment's layers from the cache (not copied yet: joining a Doc's pieces copies them); None where missing."""
    if cache is None:
        return [None] * len(sentences)
    return [cache.get(tuple(words)) for words in sentences]


def _run_segments(
    model: Model, sentences: Sequence[List[str]], pieces: List[Any], cache: Optional[FrozenCache], trainable: bool
) -> List[Tuple[List[int], Tuple[int, ...], np.ndarray, Callable]]:
    """Run the biLM on the segments missing from ``pieces``, in batches planned by length, and
    fill their layers in (and into ``cache``).

    RETURNS (list): per batch, what its backward pass needs: the segments' indices, the shape of
    the batch's layers, the lengths with <S> and </S>, and the wrapper's callback.
    """
    to_run = [index for index, piece in enumerate(pieces) if piece is None]
    batches = plan_batches(
        [len(sentences[i]) + 2 for i in to_run],
        batch_size=model.attrs["batch_size"],
        max_batch_items=model.attrs["max_batch_items"],
    )
    bilm = get_bilm(model)
    callbacks = []
    for batch in ([to_run[i] for i in b] for b in batches):
        ids, lengths = bilm.batch_ids([sentences[i] for i in batch])  # the model's own id scheme
        layers, backprop_batch = model.layers[0]((ids, lengths), trainable)
        for row, index in enumerate(batch):
            # drop the <S> and </S> positions
            pieces[index] = layers[:, row, 1 : lengths[row] - 1]
            if cache is not None:
                cache.put(tuple(sentences[index]), pieces[index])
        callbacks.append((batch, layers.shape, lengths, backprop_batch))
    return callbacks


def _doc_outputs(model: Model, segments: Sequence[Tuple[Tuple[int, int], ...]], pieces: List[Any]) -> List[ElmoOutput]:
    """Each Doc's layers: its segments' pieces joined along the token axis."""
    config = get_bilm(model).config
    xp = model.ops.xp
    outputs = []
    offset = 0
    for doc_segs in segments:
        doc_pieces = pieces[offset : offset + len(doc_segs)]
        offset += len(doc_segs)
        if doc_pieces:
            # a copy: the batch arrays can be freed, and the cache's entries stay private
            layers = xp.concatenate(doc_pieces, axis=1)
        else:
            layers = model.ops.alloc3f(config.n_output_layers, 0, config.output_dim)
        outputs.append(ElmoOutput(layers=layers, segments=doc_segs))
    return outputs


def _convert_inputs(model: Model, X: BatchInput, is_train: bool) -> Tuple[ArgsKwargs, Callable]:
    ids, lengths = X
    device = model.shims[0].device
    # character ids are indices: no gradient flows back to them
    args = ArgsKwargs(args=(torch.from_numpy(ids).to(device), torch.from_numpy(lengths)), kwargs={})
    return args, lambda d_args: None


def _convert_outputs(model: Model, inputs_outputs: Tuple[BatchInput, Any], is_train: bool) -> Tuple[Any, Callable]:
    _, output = inputs_outputs
    layers_torch = output.layers
    layers = torch2xp(layers_torch, ops=model.ops)

    def convert_gradient(d_layers: Floats3d) -> ArgsKwargs:
        d_torch = xp2torch(d_layers, device=layers_torch.device)
        return ArgsKwargs(args=(layers_torch,), kwargs={"grad_tensors": d_torch})

    return layers, convert_gradient
