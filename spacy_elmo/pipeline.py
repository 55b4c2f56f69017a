"""The `elmo` pipeline component: runs the biLM and sets doc._.elmo, token._.elmo and span._.elmo."""
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple, Union

import spacy
import srsly
from spacy import util
from spacy.language import Language
from spacy.pipeline import TrainablePipe
from spacy.pipeline.pipe import deserialize_config
from spacy.tokens import Doc
from spacy.training import Example, validate_examples
from spacy.vocab import Vocab
from thinc.api import Model, Optimizer, set_dropout_rate
from thinc.types import Floats3d

from .bilm import BiLM, BiLMConfig, VectorSetting
from .bilm.char_vocab import CharVocabulary
from .architectures import BILM_ARCHITECTURE as ARCHITECTURE
from .architectures import record_shape
from .bilm.scalar_mix import softmax_weights
from .data_classes import ElmoOutput
from .extensions import install_extensions, install_vector_hooks
from .initial_weights import initial_bilm
from .io import bilm_from_bytes, bilm_to_bytes, load_native, save_bilm
from .io.loading import PIPELINE_FACTORY
from .io.vector_file import setting_from_json, setting_to_json
from .layers import (
    apply_inference,
    bilm_weights_version,
    get_bilm,
    is_listener_for,
    send_to_listeners,
    set_bilm,
    weights_updated,
)
from .threads import one_thread_in_forked_workers
from .v1_settings import give_inference_settings

PathLike = Union[str, Path]
# what a directory's files are as last seen: name, size, modification time, inode
FilesState = Tuple[Tuple[str, int, int, int], ...]
FACTORY = PIPELINE_FACTORY
VECTOR_CHOICES = ("model", "plain")


@Language.factory(
    FACTORY,
    assigns=["doc._.elmo", "token._.elmo", "span._.elmo"],
    default_config={
        "model": {"@architectures": ARCHITECTURE},
        "mix_weights": None,
        "vectors": "model",
        "gamma": 1.0,
        "set_vector_hooks": False,
        "optimize": None,
        "precision": None,
        "char_cache_size": None,
    },
)
def make_elmo(
    nlp: Language,
    name: str,
    model: Model[List[Doc], List[ElmoOutput]],
    mix_weights: Optional[List[float]],
    vectors: str,
    gamma: float,
    set_vector_hooks: bool,
    optimize: Optional[bool],
    precision: Optional[str],
    char_cache_size: Optional[int],
) -> "Elmo":
    """Create an `elmo` component (see ``Elmo``; ``optimize``, ``precision`` and ``char_cache_size``
    are for models of ``spacy-elmo.BiLM.v1``: later versions hold them themselves)."""
    return Elmo(
        nlp.vocab,
        model,
        name,
        mix_weights=mix_weights,
        vectors=vectors,
        gamma=gamma,
        set_vector_hooks=set_vector_hooks,
        optimize=optimize,
        precision=precision,
        char_cache_size=char_cache_size,
    )


def create_pipeline(bilm: BiLM, *, lang: str = "en", config: Optional[Dict[str, Any]] = None) -> Language:
    """A blank pipeline of ``lang`` with an `elmo` component holding this biLM.

    bilm (BiLM): the weights (and with them the shape), saved with the pipeline.
    config (Optional[Dict[str, Any]]): other settings of the component (``mix_weights``,
        ``set_vector_hooks``, ...; ``model`` entries of ``spacy-elmo.BiLM.v3``, such as ``max_window``).
    RETURNS (Language): the pipeline, ready to run and to save.
    """
    config = dict(config or {})
    config["model"] = {"@architectures": ARCHITECTURE, **config.get("model", {})}
    nlp = spacy.blank(lang)
    nlp.add_pipe(FACTORY, config=config).use_bilm(bilm)
    return nlp


class Elmo(TrainablePipe):
    """Run a character-level biLM over Docs and store all its layers on them.

    Sets ``doc._.elmo`` (an ``ElmoOutput``: float32 numpy layers of shape
    (L+1, n_tokens, width) on CPU), ``token._.elmo`` (the component's own mix:
    gamma * sum_j softmax(mix_weights)_j * (layer_j - mean_j): by default the biLM's vector
    setting, else the mean of the layers; see ``vectors``) and ``span._.elmo`` (the mean of its
    tokens' mixes). With ``set_vector_hooks`` the Doc's user hooks make ``.vector`` and ``.similarity``
    of Docs, Spans and Tokens use that mix (not kept by ``Doc.to_bytes``: call
    ``spacy_elmo.extensions.install_vector_hooks(doc)`` again).

    Downstream components use the layers through listener layers (``layers.listener_protocol``):
    during ``update`` this component sends every listener the batch's outputs and a backprop
    callback. ``nlp.replace_listeners`` gives a listener its own copy (``layers.standalone``).

    The biLM (weights and shape) comes from the source the model block names (``name``; or the
    files of ``[initialize.components.NAME]``), loaded at ``initialize`` or at the first call, and
    is saved with the pipeline: the stored options decide the shape on loading.

    Inference settings (``optimize``, ``precision``, ``char_cache_size``) belong to the model
    (arguments of ``spacy-elmo.BiLM.v2`` and later; ``spacy_elmo.fast.plan`` applies them to whichever
    biLM it holds when the weights are set or change, before a prediction), and are kept in the
    pipeline's config.cfg; training a trainable biLM runs the plain float32 computation. The
    component's own arguments of those names are for models of ``spacy-elmo.BiLM.v1``
    (``v1_settings.py``). The component only turns Docs into batches and sets annotations.
    """

    def __init__(
        self,
        vocab: Vocab,
        model: Model[List[Doc], List[ElmoOutput]],
        name: str = FACTORY,
        *,
        mix_weights: Optional[Sequence[float]] = None,
        vectors: str = "model",
        gamma: float = 1.0,
        set_vector_hooks: bool = False,
        optimize: Optional[bool] = None,
        precision: Optional[str] = None,
        char_cache_size: Optional[int] = None,
    ) -> None:
        """vocab (Vocab): the shared vocabulary.
        model (Model[List[Doc], List[ElmoOutput]]): e.g. built by "spacy-elmo.BiLM.v3".
        name (str): the component instance name.
        mix_weights (Optional[Sequence[float]]): pre-softmax weight of each of the L+1 layers in
            ``token._.elmo``; None means the model's (``vectors``), else equal weights.
        vectors (str): "model": the biLM's vector setting where it has one (``BiLM.vector_setting``:
            layer weights, unless ``mix_weights`` are given, and layer means taken off); "plain":
            the layers as they are (the mean of them without ``mix_weights``).
        gamma (float): scale of the mix.
        set_vector_hooks (bool): make ``.vector`` and ``.similarity`` use ELMo.
        optimize, precision, char_cache_size: the inference settings of a model of
            "spacy-elmo.BiLM.v1" (``v1_settings.give_inference_settings``); None with later versions.
        """
        give_inference_settings(model, name, optimize=optimize, precision=precision, char_cache_size=char_cache_size)
        if vectors not in VECTOR_CHOICES:
            raise ValueError(f"[components.{name}] vectors = {vectors!r}: expected one of {', '.join(VECTOR_CHOICES)}")
        self.vocab = vocab
        self.model = model
        self.name = name
        self.mix_weights = tuple(float(w) for w in mix_weights or ())
        self.vectors = vectors
        self.gamma = float(gamma)
        self.set_vector_hooks = set_vector_hooks
        self.listener_map: Dict[str, List[Model]] = {}
        self.cfg: Dict[str, Any] = {"bilm_options": get_bilm(model).config.to_options(), "has_weights": False, "vector_setting": None}
        # per biLM directory this component wrote: the weights' version and the files as written
        self._written: Dict[Path, Tuple[Any, FilesState]] = {}
        install_extensions()
        one_thread_in_forked_workers()

    @property
    def optimize(self) -> bool:
        """RETURNS (bool): the model's setting (``fast.plan.InferencePlan``); likewise the next two."""
        return self.model.attrs["inference"].optimize

    @property
    def precision(self) -> str:
        return self.model.attrs["inference"].precision.name

    @property
    def char_cache_size(self) -> int:
        return self.model.attrs["inference"].char_cache_size

    @property
    def bilm(self) -> BiLM:
        """The torch biLM (``.embed(sentences)`` works on it directly), its weights loaded first if need be."""
        self._require_weights()
        return get_bilm(self.model)

    @property
    def listeners(self) -> List[Model]:
        """RETURNS (List[Model]): the listener layers of all downstream components, in order."""
        return [m for c in self.listening_components for m in self.listener_map[c]]

    @property
    def listening_components(self) -> List[str]:
        """RETURNS (List[str]): names of the downstream components that listen to this one."""
        return list(self.listener_map.keys())

    def add_listener(self, listener: Model, component_name: str) -> None:
        """Register a listener layer of a downstream component."""
        self.listener_map.setdefault(component_name, [])
        if listener not in self.listener_map[component_name]:
            self.listener_map[component_name].append(listener)
        self._tell_shape(listener)

    def remove_listener(self, listener: Model, component_name: str) -> bool:
        """Forget a listener layer. RETURNS (bool): whether it was registered."""
        if listener in self.listener_map.get(component_name, []):
            self.listener_map[component_name].remove(listener)
            if not self.listener_map[component_name]:
                del self.listener_map[component_name]
            return True
        return False

    def find_listeners(self, component: Any) -> None:
        """Register the listener layers in a component's model whose upstream is this component
        (``node.attrs["elmo_upstream"]`` is this component's name or "*"). spaCy calls this
        for every component after this one when the pipeline is built or loaded."""
        if isinstance(getattr(component, "model", None), Model):
            for node in component.model.walk():
                if is_listener_for(node, self.name):
                    self.add_listener(node, component.name)

    def predict(self, docs: Iterable[Doc]) -> List[ElmoOutput]:
        """Run the biLM on a batch of Docs without changing them.

        RETURNS (List[ElmoOutput]): per Doc, layers on the model's device.
        """
        self._require_weights()
        return self.model.predict(list(docs))

    def prepare_for_inference(self) -> None:
        """Apply the inference settings to the biLM now (``predict`` does this itself).

        Cheap when they are in effect already; after a training step of a trainable biLM it
        lays the changed weights out again (a copy of the LSTM weights).
        """
        apply_inference(self.model)

    def set_annotations(self, docs: Iterable[Doc], outputs: List[ElmoOutput]) -> None:
        """Store the outputs on the Docs (as float32 numpy on CPU) and install hooks if configured."""
        setting = self.vector_setting if self.vectors == "model" else None
        weights = self.mix_weights or (() if setting is None else setting.pre_softmax())
        means = None if setting is None else setting.layer_means
        for doc, output in zip(docs, outputs):
            doc._.elmo = output.settle_on_doc(
                mix_weights=weights, gamma=self.gamma, vector_hooks=self.set_vector_hooks, layer_means=means
            )
            if self.set_vector_hooks:
                install_vector_hooks(doc)

    def update(
        self,
        examples: Iterable[Example],
        *,
        drop: float = 0.0,
        sgd: Optional[Optimizer] = None,
        losses: Optional[Dict[str, float]] = None,
    ) -> Dict[str, float]:
        """Run the biLM on the batch and hand the outputs to every listener.

        Each listener gets ``receive(batch_id, outputs, backprop)``. ``backprop(d_layers)``
        takes one gradient array per Doc, shaped like that Doc's ``outputs[i].layers``;
        gradients of all listeners are summed, and the callback given to the last
        listener runs the biLM's backward pass and, if ``sgd`` is given, the optimizer
        step. With a frozen biLM (``trainable = false``, the default) the callbacks only
        record the loss. losses[name] accumulates the squared norm of the gradients.

        RETURNS (Dict[str, float]): the updated losses.
        """
        if losses is None:
            losses = {}
        losses.setdefault(self.name, 0.0)
        validate_examples(examples, "Elmo.update")
        self._require_weights()
        listeners = self.listeners
        if not listeners:
            return losses
        docs = [eg.predicted for eg in examples]
        set_dropout_rate(self.model, drop)
        outputs, backprop_layers = self.model.begin_update(docs)

        def add_loss(d_layers: Floats3d) -> None:
            losses[self.name] += float((d_layers**2).sum())

        def step_optimizer() -> None:
            if sgd not in (None, False):
                self.finish_update(sgd)

        send_to_listeners(
            listeners, docs, outputs, backprop_layers, ops=self.model.ops, on_gradient=add_loss, after_backprop=step_optimizer
        )
        return losses

    def finish_update(self, sgd: Optimizer) -> None:
        """Apply the optimizer to the biLM, unless it is frozen."""
        if self.model.attrs["trainable"]:
            self.model.finish_update(sgd)
            # thinc's optimizers write through numpy views, which torch's version counters miss
            weights_updated(self.model)

    def initialize(
        self,
        get_examples: Callable[[], Iterable[Example]],
        *,
        nlp: Optional[Language] = None,
        options: Optional[Path] = None,
        weights: Optional[Path] = None,
        model: Optional[Path] = None,
    ) -> None:
        """Import the biLM weights (and with them the biLM shape) from the source the model block
        names (``spacy-elmo.BiLM.v3``'s ``name``), unless they are loaded already (e.g. from disk).

        Settings of ``[initialize.components.elmo]`` (older configs; imported whenever given):
        ``options`` and ``weights`` (a published pair), or ``model`` (any source ``name`` takes).

        get_examples (Callable[[], Iterable[Example]]): unused: the weights come from the files.
        nlp (Optional[Language]): the pipeline; its config of this component gets the imported
            shape, so the config.cfg saved with it (e.g. by ``spacy train``) describes the weights.
        """
        if options is None and weights is None and model is None and self.cfg["has_weights"]:
            return
        source = self.model.attrs.get("source")
        self.use_bilm(initial_bilm(name=self.name, options=options, weights=weights, model=model, source=source))
        if nlp is not None:
            record_shape(nlp, self.name, self.bilm.config)

    def to_bytes(self, *, exclude: Iterable[str] = tuple()) -> bytes:
        """Serialize: cfg (with the biLM options) as JSON, weights as safetensors."""
        serialize = {
            "cfg": lambda: srsly.json_dumps(self.cfg),
            "vocab": lambda: self.vocab.to_bytes(exclude=exclude),
            "model": lambda: bilm_to_bytes(get_bilm(self.model)),
        }
        return util.to_bytes(serialize, exclude)

    def from_bytes(self, bytes_data: bytes, *, exclude: Iterable[str] = tuple()) -> "Elmo":
        """Load what ``to_bytes`` wrote, rebuilding the biLM in the stored shape."""

        def load_model(data: bytes) -> None:
            config = BiLMConfig.from_options(self.cfg["bilm_options"])
            stored = self.cfg.get("char_vocab")
            char_vocab = None if stored is None else CharVocabulary.from_json(stored)
            source = f"bytes of the '{self.name}' component"
            self._swap_bilm(bilm_from_bytes(config, data, char_vocab=char_vocab, source=source))

        deserialize = {
            "cfg": lambda b: self.cfg.update(srsly.json_loads(b)),
            "vocab": lambda b: self.vocab.from_bytes(b, exclude=exclude),
            "model": load_model,
        }
        util.from_bytes(bytes_data, deserialize, exclude)
        return self

    def to_disk(self, path: PathLike, *, exclude: Iterable[str] = tuple()) -> None:
        """Write cfg, vocab, and the biLM as a spacy-elmo model directory (``model/``).

        A frozen biLM is written once per directory: where this component wrote its weights into
        ``model/`` before and neither the weights (``layers.bilm_weights_version``) nor the files
        there (names, sizes, modification times, inodes) have changed since, they are left as they
        are. ``spacy train`` saves ``model-last`` at every evaluation; the biLM, hundreds of
        megabytes for the published original, is then written there once.
        """
        serialize = {
            "cfg": lambda p: srsly.write_json(p, self.cfg),
            "vocab": lambda p: self.vocab.to_disk(p, exclude=exclude),
            "model": self._save_bilm,
        }
        util.to_disk(path, serialize, exclude)

    def _save_bilm(self, path: Path) -> None:
        key = Path(path).resolve()
        version = bilm_weights_version(self.model)
        frozen = not self.model.attrs["trainable"]
        if frozen and self._written.get(key) == (version, _files_state(key)):
            return
        save_bilm(get_bilm(self.model), path)
        self._written[key] = (version, _files_state(key))

    def from_disk(self, path: PathLike, *, exclude: Iterable[str] = tuple()) -> "Elmo":
        """Load what ``to_disk`` wrote (checksummed safetensors; nothing is unpickled)."""
        deserialize = {
            "cfg": lambda p: self.cfg.update(deserialize_config(p)),
            "vocab": lambda p: self.vocab.from_disk(p, exclude=exclude),
            "model": lambda p: self._swap_bilm(load_native(p)),
        }
        util.from_disk(path, deserialize, exclude)
        return self

    @property
    def vector_setting(self) -> Optional[VectorSetting]:
        """RETURNS (Optional[VectorSetting]): the vector setting of the biLM the pipeline took up
        (kept in its cfg; None for a biLM without one, or a pipeline saved before them: the plain mix)."""
        stored = self.cfg.get("vector_setting")
        return None if stored is None else setting_from_json(stored, source=f"the cfg of the '{self.name}' component")

    def use_bilm(self, bilm: BiLM) -> None:
        """Use this biLM (its shape, weights and vector setting) from now on; it is saved with the pipeline."""
        self._swap_bilm(bilm)
        self.cfg["has_weights"] = True
        self.cfg["vector_setting"] = None if bilm.vector_setting is None else setting_to_json(bilm.vector_setting)

    def _swap_bilm(self, bilm: BiLM) -> None:
        softmax_weights(self.mix_weights, bilm.config.n_output_layers)  # raises if the count is wrong
        set_bilm(self.model, bilm)
        self.cfg["bilm_options"] = bilm.config.to_options()
        # a learned character vocabulary (an imported ELMoForManyLangs model) is part of the model
        self.cfg["char_vocab"] = None if bilm.char_vocab is None else bilm.char_vocab.to_json()
        for listener in self.listeners:
            self._tell_shape(listener)

    def _tell_shape(self, listener: Model) -> None:
        # Downstream components are initialized on Docs the biLM has not seen, so their
        # listeners learn the biLM's output shape from here (it changes when weights are imported).
        set_upstream_shape = getattr(listener, "set_upstream_shape", None)
        if callable(set_upstream_shape):
            config = get_bilm(self.model).config
            set_upstream_shape(config.n_output_layers, config.output_dim)

    def _require_weights(self) -> None:
        # A component called before initialize loads the source its model names (or the shipped biLM).
        if not self.cfg["has_weights"]:
            self.use_bilm(initial_bilm(name=self.name, source=self.model.attrs.get("source")))


def _files_state(path: Path) -> FilesState:
    """RETURNS (FilesState): the files of a directory as they are now (empty where there is none)."""
    if not path.is_dir():
        return ()
    stats = ((child.name, child.stat()) for child in sorted(path.iterdir()) if child.is_file())
    return tuple((name, st.st_size, st.st_mtime_ns, st.st_ino) for name, st in stats)
