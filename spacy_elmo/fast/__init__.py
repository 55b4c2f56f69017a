"""Every way the biLM runs faster than its reference computation (``spacy_elmo.bilm``).

``bilm/`` is the model as written: what the published weights were trained with, and what the
parity tests check. This package holds the optimisations, each tested against it:
``dispatch.py`` (the one place a run path is chosen, and ``attach``), ``in_place.py`` (the
timesteps on preallocated buffers), ``lockstep.py`` (both directions at once on paired weights),
``compiled.py`` (that loop in C++), ``kernel_library.py`` + ``csrc/`` (the C++ kernels, built,
verified and loaded), ``kernel_variants.py`` (the instruction sets they are built for, and the one
this CPU runs), ``kernel_build.py`` (the compiler calls), ``precision.py`` (the ``Precision`` chosen once from the user's word, and the
bf16, fp16 and int8 linear layers),
``bf16_rows.py`` (bf16 products of a few rows, one sentence at a time), ``payoff.py`` (a
reduced precision slower than fp32 says so once),
``char_cache.py`` (token encodings kept across calls), ``train_step.py`` (one autograd node per
layer for training), ``versions.py`` (have the weights changed?), ``optimize.py``
(``optimize_for_inference``, which applies them) and ``plan.py`` (``InferencePlan``, and how a held
biLM is laid out for each pass: the one function the thinc layer calls).
"""
from .char_cache import DEFAULT_CHAR_CACHE_SIZE
from .dispatch import Runner, attach, detach, op_by_op, python_step
from .optimize import forget_derived_weights, optimize_for_inference
from .plan import InferencePlan
from .precision import CPU_ONLY, PRECISIONS, Precision, choose_precision, cpu_has_bf16

__all__ = [
    "CPU_ONLY",
    "DEFAULT_CHAR_CACHE_SIZE",
    "InferencePlan",
    "PRECISIONS",
    "Precision",
    "Runner",
    "attach",
    "choose_precision",
    "cpu_has_bf16",
    "detach",
    "forget_derived_weights",
    "op_by_op",
    "optimize_for_inference",
    "python_step",
]
