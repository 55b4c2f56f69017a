"""The one place a run path of the LSTMs is chosen.

A biLM from ``spacy_elmo.bilm`` runs its reference loop (``LSTMPLayer.steps``). ``attach`` puts a
``Runner`` in its one runner slot (``BiLM.runner``): the model then asks it to encode the tokens
(through its char-CNN cache, if it has one) and to run both stacks, and the runner hands each
layer its own timestep loop (``run_steps``) where the directions run one after the other. It picks
a path for every call, from what the call needs (autograd, autocast), how the weights are laid
out (paired or not) and its two settings, ``exact`` and the ``Precision`` that ``optimize_for_inference``
chose (``precision.py``):

| path | when | where |
|---|---|---|
| ``reference`` | under autocast (but CPU bfloat16 with autograd), inside ``op_by_op()`` with autograd, or dtypes the others lack | ``bilm/lstm.py`` |
| ``train_step`` | autograd, float32/float64, or CPU autocast to bfloat16 (its products then in bfloat16) | ``train_step.py`` (one autograd node a layer) |
| ``compiled`` | no autograd, paired float32 weights, not ``exact``, the library loads | ``compiled.py`` |
| ``lockstep`` | as ``compiled``, where it is not available or inside ``python_step()`` | ``lockstep.py`` |
| ``lockstep_bf16`` | no autograd, precision ``BF16``, paired weights with its stand-ins | ``lockstep.py`` |
| ``lockstep_int8`` | no autograd, precision ``INT8``, paired weights with its stand-ins, ``int8_rows`` built | ``lockstep.py`` |
| ``in_place`` | no autograd otherwise: one direction at a time | ``in_place.py`` |

``exact`` runners (the elmo component with ``optimize = false``, training) take only paths whose
float32 results equal the reference's bit for bit; the others move at float32 rounding level.
On ``compiled`` and ``lockstep`` the float32 products take the route the runner's ``Routes`` gives
for the pass (``prepacked.py``: torch's, or oneDNN's on prepacked weights; chosen by
``payoff.choose_routes`` when ``optimize_for_inference`` runs).
"""
from typing import List, Optional, Sequence, Tuple

import torch

from ..bilm import BiLM
from ..bilm.lstm import LSTMPLayer, LSTMPStack, State
from ..bilm.model import TokenLayout
from ..bilm.token_encoder import CharCNNEncoder
from . import compiled, payoff, train_step
from .in_place import run_in_place
from .lockstep import paired_weights, run_lockstep, runs_in_lockstep
from .precision import FP32, Precision
from .prepacked import TORCH, TORCH_ROUTES, route_layers
from .switches import ThreadSwitch

StackResult = Tuple[List[torch.Tensor], List[State]]
PATHS = ("reference", "train_step", "compiled", "lockstep", "lockstep_bf16", "lockstep_int8", "in_place")
_OP_BY_OP = ThreadSwitch()
_PYTHON_STEP = ThreadSwitch()


def op_by_op():
    """Within this block (this thread), autograd runs the reference loop op by op: what the tests
    and benchmarks compare the training step with."""
    return _OP_BY_OP.on()


def python_step():
    """Within this block (this thread), the lockstep pair runs its timestep loop in Python, not
    compiled (for comparisons and benchmarks)."""
    return _PYTHON_STEP.on()


class Runner:
    """How the LSTMs of one biLM run: attached by ``attach``, not saved with the weights.

    exact (bool): take only paths bitwise equal to the reference in float32 (no lockstep pair, no
        tanh through sigmoid, no compiled loop).
    precision (Precision): what the linear layers run in (``optimize_for_inference`` chose it and put
        its stand-ins in place); layers that carry anything else run one direction at a time.
    char_cache (Optional[CharCNNCache]): token encodings kept across calls at inference
        (``char_cache.py``; ``optimize_for_inference`` sets it), or None.
    routes (Routes): where the lockstep pair's float32 products run in each regime
        (``prepacked.py``; ``optimize_for_inference`` sets them).
    """

    def __init__(self, *, exact: bool, precision: Precision = FP32) -> None:
        self.exact = exact
        self.precision = precision
        self.char_cache = None
        self.routes = TORCH_ROUTES

    def __repr__(self) -> str:
        return f"Runner(exact={self.exact}, precision={self.precision.name}, routes={tuple(self.routes)})"

    def encode_tokens(self, encoder: CharCNNEncoder, char_ids: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """``encoder.encode_distinct(char_ids)``, through the char cache at inference (eval mode, no
        autograd, no autocast): a cached token's encoding is the one computed when it was first seen."""
        if (self.char_cache is not None and not encoder.training and not torch.is_grad_enabled()
                and not torch.is_autocast_enabled(char_ids.device.type)):  # the cache keeps float32 encodings
            cache = self.char_cache
            return encoder.encode_distinct(char_ids, lambda rows: cache.encode(encoder, rows))
        return encoder.encode_distinct(char_ids)

    def layer_path(self, layer: LSTMPLayer, projected: torch.Tensor, state: State) -> str:
        """The path of one layer's timesteps (the directions one after the other)."""
        if torch.is_grad_enabled() and any(t.requires_grad for t in (projected, *state)):
            weights = (layer.state_linearity.weight, layer.projection.weight)
            if not _OP_BY_OP.active and train_step.usable(projected, *state, *weights):
                return "train_step"
            return "reference"
        if torch.is_autocast_enabled(projected.device.type):
            return "reference"  # autocast decides each op's dtype: only the reference loop follows it
        return "in_place"

    def stack_path(self, forward: LSTMPStack, backward: LSTMPStack, inputs: Sequence[torch.Tensor]) -> Optional[str]:
        """The path of both stacks in lockstep, or None: then each layer runs by ``layer_path``."""
        if self.exact or len(forward.layers) != len(backward.layers) or torch.is_autocast_enabled(inputs[0].device.type):
            return None
        parameters = (*forward.parameters(), *backward.parameters())
        if torch.is_grad_enabled() and (any(x.requires_grad for x in inputs) or any(p.requires_grad for p in parameters)):
            return None
        pairs = list(zip(forward.layers, backward.layers))
        if not runs_in_lockstep(pairs, self.precision) or any(paired_weights(*pair) is None for pair in pairs):
            return None
        if self.precision.reduced:
            return f"lockstep_{self.precision.name}"
        if not _PYTHON_STEP.active and compiled.usable(inputs[0]):
            return "compiled"
        return "lockstep"

    def run_layer(
        self, layer: LSTMPLayer, projected: torch.Tensor, batch_sizes: Sequence[int], state: State
    ) -> Tuple[torch.Tensor, State]:
        """``layer.steps(projected, batch_sizes, state)`` on the path ``layer_path`` chooses."""
        path = self.layer_path(layer, projected, state)
        if path == "train_step":
            weights = (layer.state_linearity.weight, layer.projection.weight)
            clips = (layer.cell_clip, layer.proj_clip)
            return train_step.run_steps(projected, state, weights, batch_sizes, layer.dim, clips)
        if path == "reference":
            return layer.steps(projected, batch_sizes, state)
        out, finals = run_in_place([layer], projected[None], batch_sizes, [state], fused=not self.exact)
        return out[:, 0], finals[0]

    def run_stacks(
        self,
        forward: LSTMPStack,
        backward: LSTMPStack,
        inputs: Tuple[torch.Tensor, torch.Tensor],
        batch_sizes: Sequence[int],
        states: Tuple[List[State], List[State]],
        layout: Optional[TokenLayout] = None,
    ) -> Tuple[StackResult, StackResult]:
        """Both stacks, as ``(forward(inputs[0], ...), backward(inputs[1], ...))`` computes them.

        layout (Optional[TokenLayout]): where the inputs' rows come from; in lockstep the first
            layer's input projections are then computed once per distinct token.
        """
        if not self.exact and not torch.is_grad_enabled() and len(batch_sizes):
            # a reduced precision slower than fp32: say so once
            payoff.check_pass(forward, backward, int(batch_sizes[0]), self.precision)
        path = self.stack_path(forward, backward, inputs)
        if path is None:
            return (
                forward(inputs[0], batch_sizes, states[0], self.run_layer),
                backward(inputs[1], batch_sizes, states[1], self.run_layer),
            )
        first_inputs = None if layout is None else distinct_inputs(layout)
        return run_lockstep(
            forward, backward, inputs, batch_sizes, states, self.precision, path == "compiled", first_inputs=first_inputs,
            route=self.routes.of_pass(int(batch_sizes[0]) if len(batch_sizes) else 0),
        )


def distinct_inputs(layout: TokenLayout) -> Tuple[torch.Tensor, Tuple[torch.Tensor, torch.Tensor]]:
    """The stacks' inputs as ``run_lockstep``'s ``first_inputs`` takes them: the table of distinct
    encodings and, per direction, each sorted position's row in it (padding: 0, never read)."""
    slots = torch.zeros(layout.mask.shape, dtype=torch.long, device=layout.mask.device)
    slots[layout.mask] = layout.inverse
    sorted_slots = slots.index_select(0, layout.order)
    return layout.distinct, (sorted_slots, sorted_slots.gather(1, layout.reverse))


def attach(bilm: BiLM, *, exact: bool = True, precision: Precision = FP32) -> Runner:
    """Give ``bilm`` a runner; RETURNS (Runner) it.

    precision (Precision): what its linear layers run in (``optimize_for_inference`` puts the
        stand-ins in place; ``attach`` alone does not).
    """
    runner = Runner(exact=exact, precision=precision)
    bilm.runner = runner
    return runner


def detach(bilm: BiLM) -> None:
    """Let ``bilm`` run its reference loop again, on torch's products (the oneDNN route's stand-ins,
    ``prepacked.py``, give their plain layers back)."""
    bilm.runner = None
    route_layers(bilm, TORCH)
