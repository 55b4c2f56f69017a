"""One answer to "have the weights changed?" for every cache derived from them.

The char-CNN cache (``char_cache``), the reduced-precision weight copies (``precision``'s layers,
``lockstep``'s bfloat16 pairs), the frozen component's layer cache and the component's inference
layout all keep something computed from weights, valid only while those weights stay as they were. A version key changes when a
tensor is replaced, moved, re-typed or written in place through torch (its version counter), and,
for a module, when a submodule is swapped (for example for a reduced-precision one). Writes that
torch does not count (through ``.data`` or numpy views, as thinc's optimizers make) need the
owner's explicit ``clear``/``forget``.
"""
from typing import Hashable, Optional, Tuple

import torch
from torch import nn

# what weights_version returns
WeightsVersion = Tuple[Hashable, ...]


def tensors_version(*tensors: Optional[torch.Tensor]) -> Tuple[Hashable, ...]:
    """A key of these tensors' identity, storage, in-place version, dtype and device (None stays None)."""
    return tuple(None if t is None else (id(t), t.data_ptr(), t._version, t.dtype, t.device) for t in tensors)


def weights_version(module: nn.Module) -> WeightsVersion:
    """A key of ``module``'s parameters and buffers (``tensors_version``) and of the kind (class,
    ``precision``) of each of its submodules."""
    layout = tuple((type(m), getattr(m, "precision", None)) for m in module.modules())
    return layout, tensors_version(*module.parameters(), *module.buffers())
