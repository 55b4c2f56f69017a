"""Reduced-precision linear layers for fast inference: bf16, fp16 weights, or dynamic int8.

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
- "int8": dynamic quantization (fbgemm/x86; CPU only): weights int8 per output channel,
  each input quantized to 8 bits on the fly with its own range, int32 accumulation.
"""
import warnings
from typing import Any, Iterable, List, Optional, Tuple

import torch
from torch import nn

from .versions import tensors_version

PRECISIONS = ("fp32", "bf16", "fp16", "int8")
CPU_ONLY = ("fp16", "int8")


class ReducedPrecisionLinear(nn.Linear):
    """A linear layer that runs in reduced precision at inference time.

    linear (nn.Linear): the layer whose parameters are shared (not copied).
    precision (str): "bf16", "fp16" or "int8".
    """

    def __init__(self, linear: nn.Linear, precision: str) -> None:
        if precision not in PRECISIONS[1:]:
            raise ValueError(f"precision must be one of {PRECISIONS[1:]}, not {precision!r}")
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
        return super().extra_repr() + f", precision={self.precision}"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.training or torch.is_grad_enabled():
            return super().forward(x)
        packed = self._current()
        lead = x.shape[:-1]
        flat = x.reshape(-1, self.in_features)
        if self.precision == "bf16":
            weight, bias = packed
            y = nn.functional.linear(flat.to(torch.bfloat16), weight, bias).to(x.dtype)
        elif self.precision == "fp16":
            y = torch.ops.quantized.linear_dynamic_fp16(flat.float().contiguous(), packed)
        else:
            y = torch.ops.quantized.linear_dynamic(flat.float().contiguous(), packed, reduce_range=_reduce_range())
        return y.reshape(*lead, self.out_features)

    def forget(self) -> None:
        """Drop the reduced-precision copy (remade on next use): for weights written in ways
        torch does not count (through ``.data`` or numpy views, as thinc's optimizers do)."""
        self._packed = None
        self._packed_for = None

    def _current(self) -> Any:
        weight, bias = self.weight, self.bias
        key = tensors_version(weight, bias)
        if key != self._packed_for:
            self._packed = _pack(weight.detach(), None if bias is None else bias.detach(), self.precision)
            self._packed_for = key
        return self._packed


def _pack(weight: torch.Tensor, bias: Optional[torch.Tensor], precision: str) -> Any:
    if precision == "bf16":
        return weight.to(torch.bfloat16).contiguous(), None if bias is None else bias.to(torch.bfloat16)
    if weight.device.type != "cpu":
        raise ValueError(f'precision "{precision}" runs on CPU only; use "bf16" on {weight.device.type}')
    weight = weight.float().contiguous()
    bias = None if bias is None else bias.float().contiguous()
    if precision == "fp16":
        return torch.ops.quantized.linear_prepack_fp16(weight, bias)
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


def _reduce_range() -> bool:
    # fbgemm's AVX2 kernels add pairs of u8*s8 products in int16; 7-bit inputs keep them from
    # saturating. oneDNN/qnnpack engines take the full 8 bits.
    return torch.backends.quantized.engine in ("fbgemm", "x86")


def reduce_precision(module: nn.Module, precision: str) -> int:
    """Replace every ``nn.Linear`` below ``module`` by a ``ReducedPrecisionLinear`` (or back, for "fp32").

    RETURNS (int): the number of layers replaced.
    """
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, not {precision!r}")
    count = 0
    for parent in list(module.modules()):
        for name, child in list(parent.named_children()):
            if not isinstance(child, nn.Linear):
                continue
            if precision == "fp32":
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
