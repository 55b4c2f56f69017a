"""Inference settings for a biLM: lockstep directions, char-CNN cache, reduced precision.

Every biLM already computes all timesteps' input projections in one product, drops
finished rows from each step, runs the recurrent step in place and encodes each batch's
distinct tokens once over their used characters only. ``optimize_for_inference`` adds the
options that cost memory or accuracy. Measured in ``bench/`` (README "Speed").

Threads: torch uses one intra-op thread per core by default. With other work on the
machine, set ``torch.set_num_threads(n)`` to the cores you mean to give it (the benchmark
uses 2). ``nlp.pipe(n_process=k)`` workers run on one thread each (the elmo component sees to
it: GNU OpenMP does not survive a fork); more threads than cores makes the per-timestep
products much slower, not faster.
"""
import warnings
from typing import Iterable, Optional, Union

import torch

from ..bilm import BiLM
from . import payoff, prepacked
from .char_cache import CharCNNCache
from .dispatch import attach
from .lockstep import forget_bf16_weights, pair_directions, unpair_directions
from .precision import FP32, Precision, ReducedPrecisionLinear, choose_precision, reduce_precision


def check_inference_settings(
    *, optimize: bool = True, precision: Precision, char_cache_size: int, device: Optional[torch.device] = None
) -> None:
    """Refuse inference settings that cannot run: the one check of them, for
    ``optimize_for_inference`` and for the settings a model is configured with.

    optimize (bool): whether ``optimize_for_inference`` is to run at all; without it the biLM runs
        as loaded, so ``precision`` must be ``FP32`` and ``char_cache_size`` 0.
    precision (Precision): from ``choose_precision``; ``FP16`` and ``INT8`` on CPU only.
    char_cache_size (int): >= 0.
    device (Optional[torch.device]): where the biLM runs, when known.
    """
    if char_cache_size < 0:
        raise ValueError(f"char_cache_size must be >= 0, not {char_cache_size}")
    if not optimize and (precision.reduced or char_cache_size):
        raise ValueError(
            f"precision {precision.name!r} and char_cache_size {char_cache_size} need optimize = true; "
            "set optimize = true, or precision = \"fp32\" and char_cache_size = 0"
        )
    if device is not None:
        precision.check_device(device)


def optimize_for_inference(
    bilm: BiLM,
    *,
    precision: Union[str, Precision] = "fp32",
    char_cache_size: int = 0,
    vocab: Optional[Iterable[str]] = None,
    exact: bool = False,
) -> BiLM:
    """Prepare a biLM for fast inference, in place. Training still works afterwards (in float32).

    bilm (BiLM): the model; put in eval mode.
    precision (Union[str, Precision]): "fp32" (outputs equal to the plain model to about 1e-6), or a fast mode:
        "fp16" (float16 weights, CPU), "int8" (dynamic quantization, CPU) or "bf16" (for hardware
        with bf16 arithmetic: on a CPU without AVX512-BF16 or AMX this warns and runs fp32).
        Applies to every linear layer of the LSTMs and the token encoder's highway and projection
        (with "int8" not the projection, whose input's range is set by a few large values:
        ``precision.INT8_FP32_LAYERS``); the reduced-precision copies are made on first use and
        remade when the weights change. "fp32" also undoes an earlier fast mode. The word is read
        by ``precision.choose_precision``; the runner holds the ``Precision`` that runs.
    char_cache_size (int): keep the token encodings of up to this many tokens across calls
        (0 disables). 20000 tokens take about 50 MB with the published models.
    vocab (Optional[Iterable[str]]): tokens, most frequent first, to encode into the cache now
        (at most char_cache_size); the cache then keeps exactly these. Without a vocabulary the
        cache fills as tokens are seen and evicts the least recently used; such a cache of the
        same size is kept (with its entries) when this runs again, which is then cheap.
    exact (bool): keep the plain float32 computation bit for bit. If False (the default), the float32
        products take the faster of torch's (MKL on CPU) and oneDNN's on prepacked weights, measured
        here on the model's own weights per regime (``payoff.choose_routes``, ``prepacked.py``;
        oneDNN's holds a second copy of the weights it packs). And each
        layer's weights of the two directions share one tensor (same values; the recurrent ones
        column-major), so both directions step in lockstep with batched products (see
        lockstep.py; ``dispatch.py`` chooses the path), and tanh goes through sigmoid (2.7x faster than MKL's tanh, which
        also stalls on a busy machine). Results then move at float32 rounding level: at most
        2.2e-6 on the test fixtures, whose values reach 4. The input projections of a batch go
        into a buffer kept between calls, per thread: 128 KiB per running position (padding rows
        are left out) with the full published model (about 215 MiB for 64 sentences of 20-30
        tokens), 32 KiB with the small one; the first layer's are computed once per distinct token.
    RETURNS (BiLM): the same model. (copy.deepcopy copies parameters one by one, which undoes the
        pairing of the directions: call this again on a copy.)
    """
    precision = choose_precision(precision)
    check_inference_settings(precision=precision, char_cache_size=char_cache_size, device=bilm.device)
    if not precision.pays_on(bilm.device):
        warnings.warn(
            f'precision "{precision.name}" needs a CPU with bf16 arithmetic (AVX512-BF16 or AMX), which this one '
            'lacks (torch would emulate it, several times slower than fp32): running in fp32 instead',
            RuntimeWarning,
            stacklevel=2,
        )
        precision = FP32
    bilm.eval()
    prepacked.route_layers(bilm, prepacked.TORCH)  # reduced precisions stand in for plain layers
    reduce_precision(bilm, precision, keep=precision.float32_layers)
    encoder = bilm.token_encoder
    current = None if bilm.runner is None else bilm.runner.char_cache
    runner = attach(bilm, exact=exact, precision=precision)
    if exact:
        unpair_directions(bilm.forward_lstm, bilm.backward_lstm)
    else:
        pair_directions(bilm.forward_lstm, bilm.backward_lstm)
        if not precision.reduced:
            use_routes(bilm, payoff.choose_routes(bilm.forward_lstm, bilm.backward_lstm))
    if not char_cache_size:
        runner.char_cache = None
    elif vocab is not None:
        runner.char_cache = CharCNNCache(char_cache_size, admit_new=False)
        runner.char_cache.fill(encoder, vocab, token_ids=None if bilm.char_vocab is None else bilm.char_vocab.token_ids)
    elif current is None or current.max_size != char_cache_size or not current.admit_new:
        runner.char_cache = CharCNNCache(char_cache_size)
    else:
        runner.char_cache = current
    return bilm


def use_routes(bilm: BiLM, routes: prepacked.Routes) -> None:
    """Run the float32 products of an optimized biLM (``optimize_for_inference`` with precision "fp32",
    not ``exact``) on ``routes`` (``prepacked.py``): the LSTMs' by regime, the token encoder's
    char-CNN, highway and projection on the batch route. ``optimize_for_inference`` calls it with the routes it
    measured; the tests and benchmarks, to run a given route."""
    runner = bilm.runner
    if runner is None or runner.exact or runner.precision.reduced:
        raise ValueError("routes apply to a biLM optimized for inference in fp32 (optimize_for_inference, exact=False)")
    runner.routes = routes
    prepacked.route_layers(bilm.token_encoder, routes.batch)


def forget_derived_weights(bilm: BiLM) -> None:
    """Drop what ``optimize_for_inference`` derived from the weights: char cache entries,
    reduced-precision copies and weights prepacked for oneDNN (all are remade as needed).

    They notice optimizer steps, ``load_state_dict`` and ``.to()`` themselves; call this after
    writes that torch does not count: through ``param.data`` or numpy views of the parameters,
    as thinc's optimizers write (the elmo component calls it after each update).
    """
    if bilm.runner is not None and bilm.runner.char_cache is not None:
        bilm.runner.char_cache.clear()
    for module in bilm.modules():
        if isinstance(module, ReducedPrecisionLinear):
            module.forget()
        forget_bf16_weights(module)
        prepacked.forget(module)
