"""A downstream component's own scalar mix of the biLM layers: ELMo_k = gamma * sum_j softmax(s)_j * h_kj."""
from typing import Callable, List, Tuple

from thinc.api import Model
from thinc.types import Floats2d, Floats3d

from ..bilm.scalar_mix import layer_norm, mix_layers, softmax_weights

# Pre-softmax value of a dropped layer: its softmax weight becomes 0 (all dropped: equal weights).
_DROPPED = -1e20


def ElmoMix(
    *, layer_norm: bool = False, dropout: float = 0.0, layer_dropout: float = 0.0, l2: float = 0.0
) -> Model[List[Floats3d], List[Floats2d]]:
    """Learned softmax-weighted sum of the L+1 biLM layers of each Doc, scaled by a learned gamma.

    Its parameters live in thinc (trained by spaCy's optimizer, saved with the component), and
    its input is a list of per-Doc arrays, so it is not the torch ``bilm.ScalarMix`` (which works
    on padded batches); it computes that mix with ``bilm.scalar_mix``'s array functions.

    layer_norm (bool): normalize every layer over each Doc's tokens and features before mixing
        (as ``bilm.ScalarMix(do_layer_norm=True)`` does per sentence).
    dropout (float): dropout on the mixed vectors during training. spaCy's ``[training] dropout``
        does not change it.
    layer_dropout (float): during training, drop each layer from the mix with this probability
        (its softmax weight becomes 0), so the component cannot rely on one layer only.
    l2 (float): L2 penalty lambda * ||s||^2 on the pre-softmax weights, pulling the mix
        towards the mean of the layers (the paper's regularization).
    RETURNS (Model[List[Floats3d], List[Floats2d]]): per Doc (n_tokens, width).
    """
    for name, value in (("dropout", dropout), ("layer_dropout", layer_dropout)):
        if not 0.0 <= value < 1.0:
            raise ValueError(f"ElmoMix {name} must be in [0, 1), got {value}")
    if l2 < 0.0:
        raise ValueError(f"ElmoMix l2 must be >= 0, got {l2}")
    return Model(
        "elmo_mix",
        forward,
        init=init,
        dims={"nL": None, "nO": None},
        params={"weights": None, "gamma": None},
        attrs={"layer_norm": layer_norm, "elmo_dropout": dropout, "layer_dropout": layer_dropout, "l2": l2},
    )


def mix_like(mix: Model) -> Model[List[Floats3d], List[Floats2d]]:
    """A new, separately trained ElmoMix with the settings of ``mix``."""
    attrs = mix.attrs
    return ElmoMix(
        layer_norm=attrs["layer_norm"], dropout=attrs["elmo_dropout"], layer_dropout=attrs["layer_dropout"], l2=attrs["l2"]
    )


def init(model: Model, X: List[Floats3d] = None, Y=None) -> None:
    if X is not None and X:
        model.set_dim("nL", int(X[0].shape[0]), force=True)
        model.set_dim("nO", int(X[0].shape[2]), force=True)
    if not model.has_dim("nL"):
        raise ValueError("ElmoMix needs the number of biLM layers: initialize it with a sample of layer arrays")
    model.set_param("weights", model.ops.alloc1f(model.get_dim("nL")))
    model.set_param("gamma", model.ops.asarray1f([1.0]))


def forward(model: Model, X: List[Floats3d], is_train: bool) -> Tuple[List[Floats2d], Callable]:
    ops = model.ops
    xp = ops.xp
    s = model.get_param("weights")
    gamma = model.get_param("gamma")
    n_layers = s.shape[0]
    for layers in X:
        if layers.shape[0] != n_layers:
            raise ValueError(f"ElmoMix was initialized for {n_layers} biLM layers, got {layers.shape[0]}")
    if is_train and model.attrs["layer_dropout"] > 0.0:
        kept = xp.random.uniform(size=n_layers) >= model.attrs["layer_dropout"]
        s_used = xp.where(kept, s, xp.asarray(_DROPPED, dtype=s.dtype))
    else:
        s_used = s
    w = softmax_weights(s_used, n_layers, xp)
    normed = [layer_norm(layers) if model.attrs["layer_norm"] else (layers, None) for layers in X]
    mixed = [mix_layers(n, w, gamma[0], xp) for n, _ in normed]
    p = model.attrs["elmo_dropout"] if is_train else 0.0
    masks = [ops.get_dropout_mask(m.shape, p) if p > 0.0 else None for m in mixed]
    Y = [m if mask is None else m * mask for m, mask in zip(mixed, masks)]

    def backprop(dY: List[Floats2d]) -> List[Floats3d]:
        d_w = xp.zeros_like(w)
        d_gamma = xp.zeros_like(gamma)
        dX = []
        for dy, mask, (n, stats) in zip(dY, masks, normed):
            if mask is not None:
                dy = dy * mask
            d_layer = xp.tensordot(n, dy, axes=([1, 2], [0, 1]))  # per layer: sum of n_j * dy
            d_gamma[0] += (w * d_layer).sum()
            d_w += gamma[0] * d_layer
            d_n = (gamma[0] * w)[:, None, None] * dy[None]
            dX.append(_layer_norm_backward(n, d_n, stats) if stats is not None else d_n)
        # softmax Jacobian: ds_i = w_i * (dw_i - sum_j w_j dw_j); dropped layers have w_i = 0
        d_s = w * (d_w - (w * d_w).sum()) + 2.0 * model.attrs["l2"] * s
        model.inc_grad("weights", d_s.astype("float32"))
        model.inc_grad("gamma", d_gamma.astype("float32"))
        return dX

    return Y, backprop


def _layer_norm_backward(normed: Floats3d, d_normed: Floats3d, inv_std: Floats3d) -> Floats3d:
    """The gradient of ``bilm.scalar_mix.layer_norm`` over one Doc (no mask)."""
    if normed.shape[1] == 0:
        return d_normed
    mean_d = d_normed.mean(axis=(1, 2), keepdims=True)
    mean_dn = (d_normed * normed).mean(axis=(1, 2), keepdims=True)
    return inv_std * (d_normed - mean_d - normed * mean_dn)
