"""The precision of the biLM's products at inference, chosen once; and its reduced-precision linear layers.

``choose_precision`` is the one place that reads the user's word ("fp32", "bf16", "fp16", "int8"):
it gives a ``Precision``, which the inference plan and the runner hold, and which says what the
products run in, on which kernels, where it runs, which layers it leaves in float32 and whether it
pays on this CPU. Nothing after it compares the word.

``ReducedPrecisionLinear`` is an ``nn.Linear`` that shares its parameters with the layer it
replaces, so ``state_dict()``, saving, moving and training are unchanged. Only in eval mode
with autograd off does it multiply with a reduced-precision copy of its weight, made on
first use and remade whenever the weight changes (storage, in-place version, device).

- "bf16": weight, bias and input in bfloat16, output cast back to float32. Fast where the
  hardware has bf16 arithmetic (AVX512-BF16/AMX CPUs, recent GPUs; ``cpu_has_bf16``); elsewhere
  torch emulates it, slower than fp32. The LSTMs' products then run in lockstep on bfloat16
  copies of the paired weights (lockstep.py), with cell and gates in float32.
- "fp16": weight stored as float16 and multiplied in float32 (fbgemm; CPU only). Halves the
  bytes of weight read per product at almost no cost in accuracy.
- "int8": dynamic quantization (CPU only): weights int8 per output channel, inputs quantized on
  the fly to 8 bits, int32 accumulation. Where the compiled library is built (``compiled.py``), on
  ``int8_rows``' kernel: each input row over its own range, so a row's result does not depend on
  the other rows of its batch. Elsewhere on torch's products (fbgemm/x86): one range per input
  tensor, 8 bits (7 where the engine's kernels would saturate on 8: ``int8_full_range``).
  Ranges set by a few large values lose the small ones: ``INT8_FP32_LAYERS`` are kept in
  float32 for that reason.
"""
import enum
import warnings
from dataclasses import dataclass
from typing import Any, Container, Dict, Iterable, List, Optional, Tuple, Union

import torch
from torch import nn

from . import int8_rows
from .versions import tensors_version

# Linear layers (by name below the biLM) that precision "int8" leaves in float32. The token
# encoder's projection reads the highway's output: unbounded ReLU features whose range is set by
# a few large values (0 to 49 on the shipped en_small 0.6.0, median 0.29), so one 8-bit range for
# the tensor rounds most of its inputs to a step or two, and its error (8% of the output's norm)
# reaches every layer. It runs once per distinct token not in the char cache, on 1024 x 128 weights
# for the shipped model: float32 there costs little. The LSTMs' other inputs are bounded (the
# projection clip, tanh), except the first layer's input products', which read the token encodings
# (up to 33 in magnitude there) and lose a little more; they stay int8, being a larger share of a
# batch's products (bench/int8_accuracy.py measures both choices).
INT8_FP32_LAYERS = ("token_encoder.projection",)


class Kernels(enum.Enum):
    """The products a precision runs on."""

    FLOAT32 = "torch's float32 products, or the compiled timestep loop (compiled.py)"
    BF16 = "torch's bfloat16 products; bf16_rows' kernel for a few rows"
    FP16 = "fbgemm's products of float16 weights, in float32"
    INT8 = "int8_rows' kernel, each input row quantized on its own; else torch's dynamic int8 products"


@dataclass(frozen=True)
class Precision:
    """A precision of the biLM's linear layers at inference: one of ``FP32``, ``BF16``, ``FP16``,
    ``INT8``, given by ``choose_precision``.

    name (str): the user's word for it ("fp32", "bf16", "fp16", "int8"), for configs and messages.
    products (torch.dtype): what the weights are multiplied in (int8: ``torch.int8``).
    kernels (Kernels): the products it runs on.
    cpu_only (bool): it runs on CPU only.
    needs_bf16_arithmetic (bool): on a CPU it pays only with bf16 arithmetic (``cpu_has_bf16``);
        elsewhere torch emulates it, slower than fp32 (``pays_on``).
    lockstep (bool): the two directions may step in lockstep on its layers (lockstep.py).
    float32_layers (Tuple[str, ...]): linear layers (names below the biLM) it leaves in float32.
    """

    name: str
    products: torch.dtype
    kernels: Kernels
    cpu_only: bool = False
    needs_bf16_arithmetic: bool = False
    lockstep: bool = True
    float32_layers: Tuple[str, ...] = ()

    @property
    def reduced(self) -> bool:
        """Whether it is a reduced precision (anything but float32)."""
        return self.kernels is not Kernels.FLOAT32

    def check_device(self, device: torch.device) -> None:
        """Refuse a device it cannot run on, with the user's word in the message."""
        if self.cpu_only and device.type != "cpu":
            raise ValueError(f'precision "{self.name}" runs on CPU only; use "bf16" or "fp32" on {device.type}')

    def pays_on(self, device: torch.device) -> bool:
        """Whether its products are worth running on ``device`` at all: not where a CPU would emulate
        them (bf16 without bf16 arithmetic: several times slower than fp32)."""
        return not (self.needs_bf16_arithmetic and device.type == "cpu" and not cpu_has_bf16())


FP32 = Precision("fp32", torch.float32, Kernels.FLOAT32)
BF16 = Precision("bf16", torch.bfloat16, Kernels.BF16, needs_bf16_arithmetic=True)
FP16 = Precision("fp16", torch.float16, Kernels.FP16, cpu_only=True, lockstep=False)
INT8 = Precision("int8", torch.int8, Kernels.INT8, cpu_only=True, float32_layers=INT8_FP32_LAYERS)
_CHOICES = {precision.name: precision for precision in (FP32, BF16, FP16, INT8)}
PRECISIONS = tuple(_CHOICES)  # the user's words
CPU_ONLY = tuple(name for name, precision in _CHOICES.items() if precision.cpu_only)


def choose_precision(precision: Union[str, Precision]) -> Precision:
    """The one place that reads the user's word for a precision.

    precision (Union[str, Precision]): "fp32", "bf16", "fp16" or "int8" (or a ``Precision``, given back).
    RETURNS (Precision): the precision it names. Raises ValueError for any other word.
    """
    if isinstance(precision, Precision):
        return precision
    if not isinstance(precision, str) or precision not in _CHOICES:
        raise ValueError(f"precision must be one of {PRECISIONS}, not {precision!r}")
    return _CHOICES[precision]


class ReducedPrecisionLinear(nn.Linear):
    """A linear layer that runs in reduced precision at inference time.

    linear (nn.Linear): the layer whose parameters are shared (not copied).
    precision (Union[str, Precision]): a reduced precision: ``BF16``, ``FP16`` or ``INT8`` (or its word).
    """

    def __init__(self, linear: nn.Linear, precision: Union[str, Precision]) -> None:
        precision = choose_precision(precision)
        if not precision.reduced:
            raise ValueError(f"a reduced-precision layer needs a reduced precision, not {precision.name!r}")
        nn.Module.__init__(self)
        self.in_features = linear.in_features
        self.out_features = linear.out_features
        self.weight = linear.weight
        self.bias = linear.bias
        self.training = linear.training
        self.precision = precision
        self._packed: Any = None
        self._packed_for: Optional[Tuple] = None

    def extra_repr(self) -> str:
        return super().extra_repr() + f", precision={self.precision.name}"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.training or torch.is_grad_enabled():
            return super().forward(x)
        packed = self._current()
        lead = x.shape[:-1]
        flat = x.reshape(-1, self.in_features)
        kernels = self.precision.kernels
        if kernels is Kernels.BF16:
            weight, bias = packed
            y = nn.functional.linear(flat.to(self.precision.products), weight, bias).to(x.dtype)
        elif kernels is Kernels.FP16:
            y = torch.ops.quantized.linear_dynamic_fp16(flat.float().contiguous(), packed)
        elif isinstance(packed[0], int8_rows.Int8Weights):  # each row quantized on its own (int8_rows.py)
            weights, bias = packed
            rows = flat.float().contiguous()[None]
            y = int8_rows.product(rows, weights, rows.new_empty(1, rows.shape[1], self.out_features), bias=bias)[0]
        else:
            packed, reduce_range = packed
            y = torch.ops.quantized.linear_dynamic(flat.float().contiguous(), packed, reduce_range=reduce_range)
        return y.reshape(*lead, self.out_features)

    def forget(self) -> None:
        """Drop the reduced-precision copy (remade on next use): for weights written in ways
        torch does not count (through ``.data`` or numpy views, as thinc's optimizers do)."""
        self._packed = None
        self._packed_for = None

    def _current(self) -> Any:
        weight, bias = self.weight, self.bias
        key = tensors_version(weight, bias)
        if self.precision.kernels is Kernels.INT8:  # packed for, and run with the input range of, one engine
            key += (torch.backends.quantized.engine,)
        if key != self._packed_for:
            self._packed = _pack(weight.detach(), None if bias is None else bias.detach(), self.precision)
            self._packed_for = key
        return self._packed


def _pack(weight: torch.Tensor, bias: Optional[torch.Tensor], precision: Precision) -> Any:
    if precision.kernels is Kernels.BF16:
        low = precision.products
        return weight.to(low).contiguous(), None if bias is None else bias.to(low)
    if weight.device.type != "cpu":
        raise ValueError(f'precision "{precision.name}" runs on CPU only; use "bf16" on {weight.device.type}')
    weight = weight.float().contiguous()
    bias = None if bias is None else bias.float().contiguous()
    if precision.kernels is Kernels.FP16:
        return torch.ops.quantized.linear_prepack_fp16(weight, bias)
    if int8_rows.rows_op() is not None:
        return int8_rows.pack(weight[None]), None if bias is None else bias[None].contiguous()
    # without the compiled library: torch's dynamic products, one input range per tensor
    return _pack_int8(weight, bias), not int8_full_range()


def _pack_int8(weight: torch.Tensor, bias: Optional[torch.Tensor]) -> Any:
    # Symmetric per-output-channel scales: the widest weight of each row maps to 127.
    scales = (weight.abs().amax(dim=1) / 127.0).clamp(min=1e-12).double()
    zero_points = torch.zeros(weight.shape[0], dtype=torch.long)
    with warnings.catch_warnings():
        # The quantized-tensor constructors warn about their future; the fbgemm kernels need them today.
        warnings.simplefilter("ignore")
        qweight = torch.quantize_per_channel(weight, scales, zero_points, axis=0, dtype=torch.qint8)
        return torch.ops.quantized.linear_prepack(qweight, bias)


def cpu_has_bf16(flags: Optional[Iterable[str]] = None) -> bool:
    """Whether this CPU has bf16 arithmetic (AVX512-BF16, or AMX with its bf16 unit), where "bf16" pays.

    AMX tiles alone (``amx_tile``) multiply no bfloat16; the ``amx_bf16`` flag says they do.
    Elsewhere torch emulates bfloat16 products in float32, several times slower than fp32.
    flags (Optional[Iterable[str]]): the CPU's feature flags; default: the kernel's (/proc/cpuinfo),
        or, where it has none, torch's AVX512-BF16 probe.
    """
    if flags is None:
        flags = _kernel_cpu_flags()
    if flags is not None:
        flags = set(flags)
        return "avx512_bf16" in flags or "amx_bf16" in flags
    probe = getattr(torch.cpu, "_is_avx512_bf16_supported", None)
    return bool(probe is not None and probe())


def _kernel_cpu_flags() -> Optional[List[str]]:
    """The ``flags`` line of /proc/cpuinfo, or None where there is none (not Linux, not x86)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            line = next((line for line in cpuinfo if line.startswith("flags")), None)
    except OSError:
        return None
    return None if line is None else line.split(":", 1)[-1].split()


_FULL_RANGE: Dict[str, bool] = {}


def int8_full_range(engine: Optional[str] = None) -> bool:
    """Whether ``engine``'s dynamic int8 products take 8-bit inputs without saturating; where not,
    inputs are quantized to 7 bits (``reduce_range``), half the resolution.

    Without VNNI (AVX2, AVX-512 without AVX512-VNNI) fbgemm and oneDNN add pairs of u8 * s8
    products in int16, which saturates on 8-bit inputs; with AVX512-VNNI they accumulate in int32
    and take all 8 bits. Decided by running the kernels once on inputs that saturate
    int16 pairs (not from CPU flags: which kernels run is the library's choice), once per engine.
    engine (Optional[str]): a quantized engine; default ``torch.backends.quantized.engine``.
    """
    engine = engine or torch.backends.quantized.engine
    if engine not in _FULL_RANGE:
        _FULL_RANGE[engine] = _probe_full_range(engine)
    return _FULL_RANGE[engine]


def _probe_full_range(engine: str) -> bool:
    """Whether 8-bit inputs of 255 against weights of 127 give exact products on ``engine``
    (pairs of them, 64770, saturate int16 at 32767: the result would come out about half)."""
    current = torch.backends.quantized.engine
    try:
        if engine != current:  # a global setting: switched only to probe another engine
            torch.backends.quantized.engine = engine
        packed = _pack_int8(torch.ones(8, 64), None)
        for rows in (1, 4):  # one row and several: the kernels may differ
            y = torch.ops.quantized.linear_dynamic(torch.ones(rows, 64), packed, reduce_range=False)
            if not torch.allclose(y, torch.full_like(y, 64.0), atol=0.5, rtol=0):
                return False
        return True
    except RuntimeError as error:  # an engine that cannot run these products: keep to 7 bits, and say so
        warnings.warn(
            f'precision "int8": the quantized engine {engine!r} failed the check of whether its products take '
            f"8-bit inputs ({type(error).__name__}: {str(error).splitlines()[0] if str(error) else 'no message'}); "
            "inputs are quantized to 7 bits (half the resolution). torch.backends.quantized.supported_engines "
            f"lists the others ({', '.join(torch.backends.quantized.supported_engines)})",
            RuntimeWarning,
            stacklevel=2,
        )
        return False
    finally:
        if torch.backends.quantized.engine != current:
            torch.backends.quantized.engine = current


def reduce_precision(module: nn.Module, precision: Union[str, Precision], keep: Container[str] = ()) -> int:
    """Replace every ``nn.Linear`` below ``module`` by a ``ReducedPrecisionLinear`` (or back, for ``FP32``).

    precision (Union[str, Precision]): the precision (or its word, read by ``choose_precision``).
    keep (Container[str]): names of linear layers below ``module`` (as ``named_modules`` gives them)
        to leave in (or bring back to) float32.
    RETURNS (int): the number of layers replaced.
    """
    precision = choose_precision(precision)
    count = 0
    for prefix, parent in list(module.named_modules()):
        for name, child in list(parent.named_children()):
            if not isinstance(child, nn.Linear):
                continue
            if not precision.reduced or f"{prefix}.{name}".lstrip(".") in keep:
                if isinstance(child, ReducedPrecisionLinear):
                    setattr(parent, name, _plain(child))
                    count += 1
            elif getattr(child, "precision", None) != precision:
                setattr(parent, name, ReducedPrecisionLinear(child, precision))
                count += 1
    return count


def _plain(layer: ReducedPrecisionLinear) -> nn.Linear:
    plain = nn.Linear(layer.in_features, layer.out_features, bias=layer.bias is not None, device="meta")
    plain.weight = layer.weight
    plain.bias = layer.bias
    plain.train(layer.training)
    return plain
