"""Docs -> biLM -> one ElmoOutput per Doc: the thinc model around the torch BiLM.

The torch module sits in thinc's ``PyTorchWrapper_v2`` and knows nothing of thinc;
this layer cuts Docs into segments (``doc_segments``), batches them by length
(``plan_batches``), runs the wrapper once per batch, and reassembles each Doc's
layers. Outputs are arrays of the model's ops (numpy, or cupy under
``spacy.require_gpu``); the torch module runs on the device of its parameters.
"""
from typing import Any, Callable, List, Optional, Sequence, Tuple

import numpy as np
import torch
from spacy.tokens import Doc
from thinc.api import ArgsKwargs, Model, PyTorchWrapper_v2, torch2xp, xp2torch
from thinc.types import Floats3d

from ..bilm import BiLM, batch_char_ids, plan_batches
from ..data_classes import ElmoOutput
from .segments import doc_segments

BatchInput = Tuple[np.ndarray, np.ndarray]


def ElmoBiLM(
    bilm: BiLM, *, max_window: int, batch_size: int, max_batch_items: Optional[int], trainable: bool
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
    RETURNS (Model[List[Doc], List[ElmoOutput]]): layers of shape (L+1, n_tokens, width) per Doc.
    """
    if max_window < 1 or batch_size < 1 or (max_batch_items is not None and max_batch_items < 1):
        raise ValueError(
            f"max_window ({max_window}), batch_size ({batch_size}) and max_batch_items "
            f"({max_batch_items}) must be positive"
        )
    wrapper = PyTorchWrapper_v2(bilm, convert_inputs=_convert_inputs, convert_outputs=_convert_outputs)
    model: Model[List[Doc], List[ElmoOutput]] = Model(
        "elmo_bilm",
        forward,
        layers=[wrapper],
        attrs={
            "max_window": max_window,
            "batch_size": batch_size,
            "max_batch_items": max_batch_items,
            "trainable": trainable,
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
    shim._model = bilm.to(device)
    model.set_dim("nO", bilm.config.output_dim, force=True)
    model.attrs["n_layers"] = bilm.config.n_output_layers


def forward(model: Model, docs: List[Doc], is_train: bool) -> Tuple[List[ElmoOutput], Callable]:
    wrapper = model.layers[0]
    config = get_bilm(model).config
    trainable = is_train and model.attrs["trainable"]
    segments = [tuple(doc_segments(doc, model.attrs["max_window"])) for doc in docs]
    words = [[token.text for token in doc] for doc in docs]
    flat = [(d, start, end) for d, doc_segs in enumerate(segments) for start, end in doc_segs]
    batches = plan_batches(
        [end - start + 2 for _, start, end in flat],
        batch_size=model.attrs["batch_size"],
        max_batch_items=model.attrs["max_batch_items"],
    )
    pieces: List[Any] = [None] * len(flat)
    callbacks = []
    for batch in batches:
        sentences = [words[d][start:end] for d, start, end in (flat[i] for i in batch)]
        ids, lengths = batch_char_ids(sentences, config.max_characters_per_token)
        layers, backprop_batch = wrapper((ids, lengths), trainable)
        for row, index in enumerate(batch):
            # drop the <S> and </S> positions
            pieces[index] = layers[:, row, 1 : lengths[row] - 1]
        callbacks.append((batch, layers.shape, lengths, backprop_batch))

    xp = model.ops.xp
    outputs = []
    offset = 0
    for doc_segs in segments:
        doc_pieces = pieces[offset : offset + len(doc_segs)]
        offset += len(doc_segs)
        if doc_pieces:
            layers = xp.concatenate(doc_pieces, axis=1)  # a copy: the batch arrays can be freed
        else:
            layers = model.ops.alloc3f(config.n_output_layers, 0, config.output_dim)
        outputs.append(ElmoOutput(layers=layers, segments=doc_segs))

    def backprop(d_layers: Sequence[Floats3d]) -> List[Doc]:
        if not trainable:
            return []
        for batch, shape, lengths, backprop_batch in callbacks:
            d_batch = model.ops.alloc(shape, dtype="float32")
            for row, index in enumerate(batch):
                d, start, end = flat[index]
                d_batch[:, row, 1 : lengths[row] - 1] = d_layers[d][:, start:end]
            backprop_batch(d_batch)
        return []

    return outputs, backprop


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
