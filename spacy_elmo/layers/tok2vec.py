"""A downstream tok2vec that uses ELMo as the paper does: [x_k ; ELMo_k] before the encoder, [h_k ; ELMo_k] after."""
from typing import Callable, List, Optional, Tuple

from spacy.tokens import Doc
from thinc.api import Model
from thinc.types import Floats2d, Floats3d


def ElmoTok2Vec(
    listener: Model[List[Doc], List[Floats3d]],
    input_mix: Optional[Model[List[Floats3d], List[Floats2d]]],
    output_mix: Optional[Model[List[Floats3d], List[Floats2d]]],
    embed: Optional[Model[List[Doc], List[Floats2d]]],
    encode: Optional[Model[List[Floats2d], List[Floats2d]]],
) -> Model[List[Doc], List[Floats2d]]:
    """Combine the listener's biLM layers with a classic embedding and encoder.

    x_k = [embed_k ; input_mix_k] (or either alone) -> encode -> h_k, output [h_k ; output_mix_k]
    (or h_k alone). Without an encoder the output is [x_k ; output_mix_k].
    The listener runs once per batch, however many mixes read it, and gets one summed gradient.

    listener (Model[List[Doc], List[Floats3d]]): an ``ElmoListener``.
    input_mix (Optional[Model]): the mix concatenated before the encoder, or None.
    output_mix (Optional[Model]): the mix concatenated after the encoder, or None.
    embed (Optional[Model[List[Doc], List[Floats2d]]]): e.g. spacy.MultiHashEmbed.v2, or None.
    encode (Optional[Model[List[Floats2d], List[Floats2d]]]): per Doc x_k -> h_k (see ``architectures``:
        a projection to the encoder's width, then e.g. spacy.MaxoutWindowEncoder.v2), or None.
    RETURNS (Model[List[Doc], List[Floats2d]]): per Doc (n_tokens, nO).
    """
    if input_mix is None and output_mix is None:
        raise ValueError("ElmoTok2Vec needs ELMo at the input, the output, or both")
    if input_mix is None and embed is None:
        raise ValueError("ElmoTok2Vec needs an input: an embedding, ELMo at the input, or both")
    parts = {
        "listener": listener,
        "input_mix": input_mix,
        "output_mix": output_mix,
        "embed": embed,
        "encode": encode,
    }
    present = {name: layer for name, layer in parts.items() if layer is not None}
    return Model(
        "elmo_tok2vec",
        forward,
        init=init,
        layers=list(present.values()),
        refs=present,
        dims={"nO": _output_width(present)},
    )


def _output_width(parts: dict) -> Optional[int]:
    """nO when the parts know it, so components can size their output layer from the config."""
    widths = []
    if "encode" in parts:
        widths.append(parts["encode"].maybe_get_dim("nO"))
    else:
        widths += [parts[n].maybe_get_dim("nO") for n in ("embed", "input_mix") if n in parts]
    if "output_mix" in parts:
        widths.append(parts["output_mix"].maybe_get_dim("nO"))
    return None if None in widths else sum(widths)


def init(model: Model, X: Optional[List[Doc]] = None, Y=None) -> None:
    if X is None:
        for layer in model.layers:
            layer.initialize()
        return
    get = model.maybe_get_ref
    layers, _ = get("listener")(X, is_train=False)
    inputs = []
    if get("embed") is not None:
        get("embed").initialize(X=X)
        inputs.append(get("embed").predict(X))
    for name in ("input_mix", "output_mix"):
        if get(name) is not None:
            get(name).initialize(X=layers)
    if get("input_mix") is not None:
        inputs.append(get("input_mix").predict(layers))
    hidden = _concat(model, inputs)
    if get("encode") is not None:
        get("encode").initialize(X=hidden)
        hidden = get("encode").predict(hidden)
    outputs = [hidden] + ([get("output_mix").predict(layers)] if get("output_mix") is not None else [])
    model.set_dim("nO", int(_concat(model, outputs)[0].shape[1]), force=True)


def forward(model: Model, docs: List[Doc], is_train: bool) -> Tuple[List[Floats2d], Callable]:
    get = model.maybe_get_ref
    layers, bp_listener = get("listener")(docs, is_train)
    inputs, bp_inputs = [], []
    for name, source in (("embed", docs), ("input_mix", layers)):
        if get(name) is not None:
            out, bp = get(name)(source, is_train)
            inputs.append(out)
            bp_inputs.append((name, bp))
    hidden = _concat(model, inputs)
    bp_encode = None
    if get("encode") is not None:
        hidden, bp_encode = get("encode")(hidden, is_train)
    outputs = [hidden]
    bp_output_mix = None
    if get("output_mix") is not None:
        elmo_out, bp_output_mix = get("output_mix")(layers, is_train)
        outputs.append(elmo_out)
    Y = _concat(model, outputs)

    def backprop(dY: List[Floats2d]) -> List[Doc]:
        d_outputs = _split(model, dY, [o[0].shape[1] if o else 0 for o in outputs])
        d_layers = bp_output_mix(d_outputs[1]) if bp_output_mix is not None else None
        d_hidden = bp_encode(d_outputs[0]) if bp_encode is not None else d_outputs[0]
        d_inputs = _split(model, d_hidden, [i[0].shape[1] if i else 0 for i in inputs])
        for (name, bp), d in zip(bp_inputs, d_inputs):
            d_part = bp(d)
            if name == "input_mix":
                d_layers = d_part if d_layers is None else [a + b for a, b in zip(d_layers, d_part)]
        return bp_listener(d_layers)

    return Y, backprop


def _concat(model: Model, parts: List[List[Floats2d]]) -> List[Floats2d]:
    """Per Doc, the parts' arrays side by side."""
    if len(parts) == 1:
        return parts[0]
    return [model.ops.xp.hstack(per_doc) for per_doc in zip(*parts)]


def _split(model: Model, arrays: List[Floats2d], widths: List[int]) -> List[List[Floats2d]]:
    """Undo ``_concat``: per part, the columns it contributed."""
    if len(widths) == 1:
        return [arrays]
    bounds = [sum(widths[:i]) for i in range(len(widths) + 1)]
    return [[a[:, bounds[i] : bounds[i + 1]] for a in arrays] for i in range(len(widths))]
