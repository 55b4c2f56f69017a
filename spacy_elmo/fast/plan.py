"""How a held biLM runs each pass: the one place that decides its layout and inference settings.

A model layer that holds a biLM (``layers/bilm_model.py``) keeps an ``InferencePlan`` (the
``optimize``, ``Precision`` and ``char_cache_size`` it was configured with) and, before every pass,
calls ``prepare_pass``; when it is given a biLM it calls ``adopt``. Everything else follows from
here: a new biLM gets an exact runner (the in-place loop and the training step, bitwise the
reference's); a pass that trains the weights runs on the plain layout of a freshly built model;
a prediction applies the plan's settings (``optimize_for_inference``) once per version of the
weights, not at every call.
"""
from typing import Any, Dict, Optional, Tuple, Union

from ..bilm import BiLM
from .dispatch import attach
from .lockstep import unpair_directions
from .optimize import check_inference_settings, optimize_for_inference
from .precision import Precision, choose_precision
from .versions import WeightsVersion, weights_version


class InferencePlan:
    """How a held biLM runs at prediction: ``optimize_for_inference`` settings, and the state of the
    weights they were last applied to.

    optimize (bool): apply ``optimize_for_inference`` (False: the plain computation, bit for bit).
    precision (Union[str, Precision]): the user's word, "fp32", "bf16", "fp16" or "int8" (needs
        ``optimize``), read here once (``choose_precision``): the plan holds the ``Precision``.
    char_cache_size (int): char-CNN cache entries, 0 for none (needs ``optimize``).
    from_architecture (bool): the settings are arguments of the model's architecture
        (``spacy-elmo.BiLM.v2``), so the elmo component's own arguments may not change them.

    The settings are checked here, once (``optimize.check_inference_settings``). Part of a model's
    config, not of its weights: serialized models keep the settings of the config they are loaded
    with.
    """

    def __init__(
        self,
        *,
        optimize: bool = False,
        precision: Union[str, Precision] = "fp32",
        char_cache_size: int = 0,
        from_architecture: bool = False,
    ) -> None:
        self.precision = choose_precision(precision)
        check_inference_settings(optimize=optimize, precision=self.precision, char_cache_size=char_cache_size)
        self.optimize = bool(optimize)
        self.char_cache_size = int(char_cache_size)
        self.from_architecture = from_architecture
        self._applied_to: Optional[Tuple[int, WeightsVersion]] = None

    def __deepcopy__(self, memo: dict) -> "InferencePlan":
        return InferencePlan(**self.settings(), from_architecture=self.from_architecture)

    def settings(self) -> Dict[str, Any]:
        """RETURNS (Dict[str, Any]): ``optimize``, ``precision`` (the user's word) and ``char_cache_size``,
        as a config gives them."""
        return {"optimize": self.optimize, "precision": self.precision.name, "char_cache_size": self.char_cache_size}

    def apply(self, bilm: BiLM, version: Optional[WeightsVersion] = None) -> Optional[WeightsVersion]:
        """Put the settings into effect on ``bilm`` unless they already are for its current weights.

        version (Optional[WeightsVersion]): ``weights_version(bilm)`` if the caller has it (None:
            taken here when needed).
        RETURNS (Optional[WeightsVersion]): the weights' version after this, for other caches keyed
            on it: ``version`` itself unless the settings were applied now.
        """
        if not self.optimize:
            return version
        if version is None:
            version = weights_version(bilm)
        if self._applied_to == (id(bilm), version):
            return version
        optimize_for_inference(bilm, precision=self.precision, char_cache_size=self.char_cache_size)
        # pairing the directions replaces the LSTM weight tensors: key the state they are left in
        version = weights_version(bilm)
        self._applied_to = (id(bilm), version)
        return version

    def forget(self) -> None:
        """Apply again at the next prediction."""
        self._applied_to = None


def adopt(bilm: BiLM, plan: InferencePlan) -> None:
    """A holder takes ``bilm``: give it the exact runner unless it has one, and apply ``plan``
    afresh at the next prediction."""
    if bilm.runner is None:  # the in-place loop and the training step, bitwise the reference's
        attach(bilm)
    plan.forget()


def prepare_pass(
    bilm: BiLM, plan: InferencePlan, *, is_train: bool, trains_weights: bool, need_version: bool
) -> Optional[WeightsVersion]:
    """Lay ``bilm`` out for one pass, taking the weights' version at most once.

    is_train (bool): a training pass (the plan's settings are for predictions only).
    trains_weights (bool): gradients flow into the biLM in this pass.
    need_version (bool): the caller keys a cache on the weights and wants their version.
    RETURNS (Optional[WeightsVersion]): the weights' version after the layout is settled (None when
        neither the caller nor the plan needed it).
    """
    if trains_weights:
        # Train on a freshly built model's layout: with the weights a prediction paired, autograd
        # would copy every gradient into their column-major layout (and warn each step).
        unpair_directions(bilm.forward_lstm, bilm.backward_lstm)
    predicting = not is_train and plan.optimize
    version = weights_version(bilm) if need_version or predicting else None
    if predicting:
        version = plan.apply(bilm, version)
    return version
