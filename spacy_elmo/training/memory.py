"""Keep the memory a training step frees for the next step (glibc's allocator).

A training step allocates and frees the same large tensors every time: the LSTM's saved
activations, the sampled softmax's (tokens x samples) logits, their gradients. By default glibc
serves blocks from 128 KB to 32 MB from its heap or the kernel depending on what was freed
before, returns the heap's free top to the kernel, and maps every block above 32 MB afresh;
each fresh page then costs a page fault and the kernel's zeroing on first touch. With
``keep_freed_memory`` the allocator takes all blocks from its heap and never gives the heap
back, so a step reuses the pages of the steps before it once the heap has grown to the largest
batch. Interleaved by revision in short processes (12 steps each, the heap still growing):
1.04x median, range 0.93-1.31 (``results/bench/intel-f6-model-unrecorded/pretrain-step-ab-malloc.md``); in a
longer run (a one-off reading) page faults fell from 120,000-160,000 a step to under 2,000.
The process keeps its peak memory until it exits, which is what a training run does anyway.
``pretrain`` and ``finetune`` call it; ``SPACY_ELMO_MALLOC=0`` leaves the allocator alone.

``keep_made_kernels`` does the same for oneDNN's kernels. oneDNN makes (JIT-compiles) a kernel for
each shape of a convolution or bf16 product and keeps the last 1,024 it made. A training batch has
its own counts of distinct tokens and of running rows at each timestep, so a step meets hundreds of
shapes and the default cache holds too few of them to keep a step's kernels until the next
(bench/bench_fresh_batches.py measures fresh batches with each capacity). It takes effect where it
runs before oneDNN's first kernel: ``pretrain`` and ``finetune`` set it as they start (reading
their config), and ``setup_process`` once more. Other commands (``serve``, ``embed-corpus``) keep
oneDNN's default, which bounds a long-running process's memory.
"""

import ctypes
import os
import sys

M_TRIM_THRESHOLD = -1  # mallopt parameters (malloc.h)
M_MMAP_MAX = -4
ENV = "SPACY_ELMO_MALLOC"


def keep_freed_memory() -> bool:
    """Set glibc's allocator to reuse freed memory; RETURNS whether it was set (False where the C
    library has no ``mallopt``: not Linux, or not glibc, or switched off by the environment)."""
    if not sys.platform.startswith("linux") or os.environ.get(ENV, "1") == "0":
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    # no block from mmap (a failed heap extension still falls back to it), no trimming below 2 GB free
    return bool(mallopt(M_MMAP_MAX, 0)) and bool(mallopt(M_TRIM_THRESHOLD, 2**31 - 1))


PRIMITIVE_CACHE = "ONEDNN_PRIMITIVE_CACHE_CAPACITY"
KEPT_KERNELS = 8192


def keep_made_kernels() -> str:
    """Have oneDNN keep up to ``KEPT_KERNELS`` kernels it made (its ``ONEDNN_PRIMITIVE_CACHE_CAPACITY``)
    unless the environment names another number; RETURNS the capacity the environment now names.
    Read by oneDNN once, when it makes its first kernel: later calls change nothing."""
    return os.environ.setdefault(PRIMITIVE_CACHE, str(KEPT_KERNELS))
