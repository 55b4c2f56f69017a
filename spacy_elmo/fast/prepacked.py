"""float32 products on weights prepacked for oneDNN: the ``"onednn"`` route of the fp32 products.

torch sends a float32 ``nn.Linear`` / ``mm`` / ``bmm`` on CPU to MKL. On some CPUs (an AMD EPYC with
AVX-512, docs/speed.md) MKL runs these shapes at a third to a half of what the same torch build
reaches through its own oneDNN on weights reordered once into oneDNN's blocked layout
(``torch.ops.mkldnn._reorder_linear_weight``, then ``torch.ops.mkldnn._linear_pointwise``): the
path torch's own compiler takes for frozen linear layers. Elsewhere (Intel CPUs, AVX2-only CPUs)
MKL is as fast. So ``payoff.choose_routes`` times both on the model's own shapes when
``optimize_for_inference`` runs, and a ``Routes`` says which runs in each regime.

A route is ``TORCH`` (torch's float32 products: MKL on CPU) or ``ONEDNN`` (this module). oneDNN's
products on prepacked weights sum each row in the same order whatever the number of rows from two
rows up (1 to 2 threads, 2 to 1280 rows, every shape of the published models; tests/fast/test_prepacked.py
holds it on the fixtures); one row takes another kernel, so a single row is computed as two equal
rows (``product``): a row's result is then the same alone and in any batch. MKL's are not (its
one-row kernel, and its split of the sums, change with the rows).

The packed weights are derived weights, kept per module in a weak table (an opaque oneDNN tensor
can be neither copied nor pickled, so it stays off the module) under the weights' version
(``versions.tensors_version``): remade after an optimizer step, ``load_state_dict`` or ``.to()``;
``forget`` drops them for writes torch does not count (``optimize.forget_derived_weights``). They
are a second copy of the weights they pack: the memory of the model's linear layers again.
"""
import weakref
from typing import Any, Callable, NamedTuple, Optional, Sequence, Tuple

import torch
from torch import nn

from .versions import tensors_version

TORCH = "torch"  # torch's float32 products (MKL on CPU)
ONEDNN = "onednn"  # oneDNN's products on prepacked weights (this module)
ROUTES = (TORCH, ONEDNN)
# per module: (the weights' version, what was packed from them)
_PACKS: "weakref.WeakKeyDictionary[nn.Module, Tuple[Tuple, Any]]" = weakref.WeakKeyDictionary()


class Routes(NamedTuple):
    """Which route the float32 products take at inference, per regime: ``one_sentence`` for passes
    whose first timestep has one row, ``batch`` for the others and for the token encoder's products
    (the distinct tokens of a call, many rows). Each is ``TORCH`` or ``ONEDNN``."""

    one_sentence: str = TORCH
    batch: str = TORCH

    @property
    def batch_invariant(self) -> bool:
        """Whether a row's products are bitwise the same alone and in any batch: oneDNN's in both regimes."""
        return self.one_sentence == ONEDNN and self.batch == ONEDNN

    def of_pass(self, first_rows: int) -> str:
        """The route of a pass whose first timestep has ``first_rows`` rows."""
        return self.one_sentence if first_rows == 1 else self.batch


TORCH_ROUTES = Routes(TORCH, TORCH)


def available() -> bool:
    """Whether this torch build has oneDNN's linear ops on CPU."""
    return (
        torch.backends.mkldnn.is_available()
        and hasattr(torch.ops.mkldnn, "_reorder_linear_weight")
        and hasattr(torch.ops.mkldnn, "_linear_pointwise")
    )


def usable(weight: torch.Tensor) -> bool:
    """Whether the products with ``weight`` may take the oneDNN route: float32 on CPU, where it is built."""
    return weight.device.type == "cpu" and weight.dtype == torch.float32 and available()


def pack(weight: torch.Tensor) -> torch.Tensor:
    """(out, in) float32 CPU weights (any strides) in oneDNN's layout for ``product``."""
    return torch.ops.mkldnn._reorder_linear_weight(weight.detach().contiguous())


def product(
    x: torch.Tensor, packed: torch.Tensor, bias: Optional[torch.Tensor] = None, add: Optional[torch.Tensor] = None
) -> torch.Tensor:
    """``x @ W^T (+ bias) (+ add)`` for (n, in) float32 ``x`` and ``pack(W)``; ``add`` (n, out).

    One row is computed as two equal rows, so that it is summed as every row of a larger batch is.
    RETURNS (Tensor): (n, out), new.
    """
    rows = x.shape[0]
    if rows == 1:
        x = x.expand(2, -1)
        add = None if add is None else add.expand(2, -1)
    x = x.contiguous()
    if add is None:
        y = torch.ops.mkldnn._linear_pointwise(x, packed, bias, "none", [], "")
    elif bias is None:
        y = torch.ops.mkldnn._linear_pointwise.binary(x, add.contiguous(), packed, None, "add")
    else:
        y = torch.ops.mkldnn._linear_pointwise.binary(x, add.contiguous(), packed, bias, "add")
    return y[:1] if rows == 1 else y


def cached(owner: nn.Module, tensors: Sequence[Optional[torch.Tensor]], make: Callable[[], Any]) -> Any:
    """``make()``, kept for ``owner`` while ``tensors`` (what it is made from) stay as they are."""
    key = tensors_version(*tensors)
    entry = _PACKS.get(owner)
    if entry is None or entry[0] != key:
        entry = (key, make())
        _PACKS[owner] = entry
    return entry[1]


def forget(module: nn.Module) -> None:
    """Drop what was packed for ``module`` (remade at the next use)."""
    _PACKS.pop(module, None)


class PrepackedLinear(nn.Linear):
    """A linear layer whose float32 products at inference take the oneDNN route.

    linear (nn.Linear): the layer whose parameters are shared (not copied): ``state_dict()``,
    saving, moving and training are unchanged. In training mode, with autograd on, or where the
    route cannot run (``usable``), it is the plain layer.
    """

    def __init__(self, linear: nn.Linear) -> None:
        nn.Module.__init__(self)
        self.in_features = linear.in_features
        self.out_features = linear.out_features
        self.weight = linear.weight
        self.bias = linear.bias
        self.training = linear.training

    def extra_repr(self) -> str:
        return super().extra_repr() + f", route={ONEDNN}"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.training or torch.is_grad_enabled() or not usable(self.weight) or x.dtype != torch.float32:
            return super().forward(x)
        weight = self.weight
        packed = cached(self, (weight, self.bias), lambda: pack(weight))
        lead = x.shape[:-1]
        y = product(x.reshape(-1, self.in_features), packed, None if self.bias is None else self.bias.detach())
        return y.reshape(*lead, self.out_features)


class PrepackedConv1d(nn.Conv1d):
    """A 1-d convolution (stride 1, no padding or dilation, one group: the char-CNN's) whose float32
    products at inference take the oneDNN route: every window of every row is one row of a product
    with the filters, so a token's features do not depend on the other tokens convolved with it
    (torch's convolution of a batch sums otherwise than of one token).

    conv (nn.Conv1d): the layer whose parameters are shared (not copied). In training mode, with
    autograd on, or where the route cannot run (``usable``), it is the plain layer.
    """

    def __init__(self, conv: nn.Conv1d) -> None:
        if not convolves_as_product(conv):
            raise ValueError(f"{conv} is not a convolution of stride 1 without padding, dilation or groups")
        nn.Module.__init__(self)
        for name in ("in_channels", "out_channels", "kernel_size", "stride", "padding", "dilation", "transposed",
                     "output_padding", "groups", "padding_mode", "_reversed_padding_repeated_twice"):
            setattr(self, name, getattr(conv, name))
        self.weight = conv.weight
        self.bias = conv.bias
        self.training = conv.training

    def extra_repr(self) -> str:
        return super().extra_repr() + f", route={ONEDNN}"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.training or torch.is_grad_enabled() or not usable(self.weight) or x.dtype != torch.float32 or x.dim() != 3:
            return super().forward(x)
        weight = self.weight
        packed = cached(self, (weight, self.bias), lambda: pack(weight.reshape(self.out_channels, -1)))
        rows, channels, length = x.shape
        width = self.kernel_size[0]
        windows = x.unfold(2, width, 1).permute(0, 2, 1, 3).reshape(-1, channels * width)  # (rows x positions, in x width)
        y = product(windows, packed, None if self.bias is None else self.bias.detach())
        return y.view(rows, length - width + 1, self.out_channels).transpose(1, 2)


def convolves_as_product(conv: nn.Module) -> bool:
    """Whether ``conv`` is a plain ``nn.Conv1d`` that ``PrepackedConv1d`` can stand in for."""
    return (
        type(conv) is nn.Conv1d
        and conv.stride == (1,)
        and conv.padding == (0,)
        and conv.dilation == (1,)
        and conv.groups == 1
    )


def route_layers(module: nn.Module, route: str) -> int:
    """Put ``PrepackedLinear`` and ``PrepackedConv1d`` stand-ins in place of the plain ``nn.Linear``
    and ``nn.Conv1d`` layers below ``module`` (route ``ONEDNN``), or the plain layers back (``TORCH``).

    RETURNS (int): the number of layers replaced.
    """
    if route not in ROUTES:
        raise ValueError(f"route must be one of {ROUTES}, not {route!r}")
    count = 0
    for parent in list(module.modules()):
        for name, child in list(parent.named_children()):
            if route == ONEDNN and type(child) is nn.Linear:
                setattr(parent, name, PrepackedLinear(child))
            elif route == ONEDNN and convolves_as_product(child):
                setattr(parent, name, PrepackedConv1d(child))
            elif route == TORCH and isinstance(child, (PrepackedLinear, PrepackedConv1d)):
                setattr(parent, name, _plain(child))
            else:
                continue
            count += 1
    return count


def _plain(layer: nn.Module) -> nn.Module:
    """The plain torch layer a stand-in shares its parameters with."""
    if isinstance(layer, PrepackedLinear):
        plain = nn.Linear(layer.in_features, layer.out_features, bias=layer.bias is not None, device="meta")
    else:
        plain = nn.Conv1d(layer.in_channels, layer.out_channels, layer.kernel_size, bias=layer.bias is not None, device="meta")
    plain.weight, plain.bias = layer.weight, layer.bias
    plain.train(layer.training)
    return plain


class PairPacks(NamedTuple):
    """A lockstep layer pair's weights packed for ``product``, one entry per direction."""

    inputs: Tuple[torch.Tensor, ...]  # input projections (4 * dim, in)
    input_biases: Tuple[torch.Tensor, ...]
    state: Tuple[torch.Tensor, ...]  # recurrent products (4 * dim, projection_dim)
    projection: Tuple[torch.Tensor, ...]  # cell projections (projection_dim, dim)


def pair_packs(pair: Sequence[nn.Module]) -> PairPacks:
    """The weights of a pair of ``LSTMPLayer`` (the two directions) packed for ``product``, made once
    per weights version and kept for the pair's first layer."""
    linears = [(layer.input_linearity, layer.state_linearity, layer.projection) for layer in pair]
    tensors = [t for group in linears for linear in group for t in (linear.weight, linear.bias)]

    def make() -> PairPacks:
        return PairPacks(
            inputs=tuple(pack(group[0].weight) for group in linears),
            input_biases=tuple(group[0].bias.detach().contiguous() for group in linears),
            state=tuple(pack(group[1].weight) for group in linears),
            projection=tuple(pack(group[2].weight) for group in linears),
        )

    return cached(pair[0], tensors, make)
