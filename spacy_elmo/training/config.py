"""The pretraining config: a spaCy-style .cfg file, with `--section.key value` overrides as `spacy train`."""
import warnings
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Dict, FrozenSet, Optional, Union

from confection import Config, ConfigValidationError  # (thinc.api re-exports these; confection alone keeps training free of thinc)

from ..bilm import BiLMConfig
from ..probes import TASKS

SECTIONS = ("paths", "system", "corpus", "vocab", "model", "softmax", "training", "finetune", "probe")
AUTOCASTS = ("off", "bf16", "fp16")
# [training] autocast was named precision, with "fp32" for "off": read until the next release, with a warning
AUTOCAST_WAS = {"fp32": "off", "bf16": "bf16"}


@dataclass(frozen=True)
class CorpusSettings:
    """[corpus]: how files are read and cut (see configs/bilm-small.cfg for each setting)."""

    format: str = "auto"
    # "auto" (whitespace for pre-tokenized text, else the language's spaCy tokenizer), "whitespace"
    # or a spaCy language code
    tokenizer: str = "auto"
    # the text's language (its spaCy tokenizer for raw text); fine-tuning takes the model's where it records one
    lang: Optional[str] = None
    # "lines" (one sentence a line), "sentencizer" or a trained spaCy pipeline's name (wrapped text:
    # each paragraph's lines joined and cut into sentences), "auto" (the sentencizer for raw text
    # whose lines run on into the next, else lines)
    sentences: str = "auto"
    max_line_chars: int = 20000
    max_sentence_tokens: int = 100
    buffer_size: int = 20000
    dev_max_segments: int = 0

    def __post_init__(self) -> None:
        if not self.tokenizer or not self.sentences:
            raise ValueError("[corpus] tokenizer and sentences must not be empty")
        if self.lang is not None and str(self.lang).strip() in ("", "null", "None"):
            object.__setattr__(self, "lang", None)


@dataclass(frozen=True)
class VocabSettings:
    """[vocab]: the softmax vocabulary counted from the training corpus."""

    size: int = 50000
    min_count: int = 2


@dataclass(frozen=True)
class SoftmaxSettings:
    """[softmax]: n_samples > 0 trains a sampled softmax with that many candidates."""

    n_samples: int = 0


@dataclass(frozen=True)
class TrainingSettings:
    """[training]: the loop (optimizer, batches, limits, frequencies)."""

    mode: str = "sentences"
    batch_size: int = 64
    max_batch_tokens: int = 2048
    unroll_steps: int = 20
    optimizer: str = "adagrad"
    learning_rate: float = 0.2
    initial_accumulator: float = 1.0
    adam_beta1: float = 0.9
    adam_beta2: float = 0.999
    # linear warm-up from 0 over this many steps, then "constant" or "inverse_sqrt" (lr * sqrt(warmup / step))
    warmup_steps: int = 0
    lr_schedule: str = "constant"
    # "off", "bf16": the forward pass under CPU/GPU autocast to bfloat16 (weights, optimizer and
    # loss stay fp32); a CPU without bf16 arithmetic emulates it, slower than fp32, and the run warns
    # (as it does where bf16's training products, timed once per machine, run slower than fp32's)
    # (setup.py); or "fp16": autocast to float16 on a GPU, with a gradient scaler (float16's range is
    # too narrow for small gradients). Formerly "precision" ("fp32" or "bf16"), read with a DeprecationWarning.
    autocast: str = "off"
    # on a GPU, float32 products in TF32 (10-bit mantissa) on tensor cores: faster, less exact;
    # set explicitly for every run (torch's own default has changed between releases)
    tf32: bool = False
    grad_clip: float = 10.0
    dropout: float = 0.1
    max_epochs: int = 10
    max_steps: int = 0
    # seconds for one invocation (0: none), as --max-time: a run resumed with --resume gets them again
    max_time: float = 0.0
    eval_frequency: int = 500
    checkpoint_frequency: int = 500
    keep_checkpoints: int = 3
    log_frequency: int = 10

    def __post_init__(self) -> None:
        problems = []
        if self.mode not in ("sentences", "windows"):
            problems.append(f"training.mode must be 'sentences' or 'windows', not {self.mode!r}")
        if self.optimizer not in ("adagrad", "adam"):
            problems.append(f"training.optimizer must be 'adagrad' or 'adam', not {self.optimizer!r}")
        if self.lr_schedule not in ("constant", "inverse_sqrt"):
            problems.append(f"training.lr_schedule must be 'constant' or 'inverse_sqrt', not {self.lr_schedule!r}")
        if self.autocast not in AUTOCASTS:
            problems.append(f"training.autocast must be one of {AUTOCASTS}, not {self.autocast!r}")
        if self.warmup_steps < 0:
            problems.append("training.warmup_steps must be >= 0")
        if not 0.0 <= self.dropout < 1.0:
            problems.append("training.dropout must be in [0, 1)")
        for name in ("batch_size", "unroll_steps", "eval_frequency", "checkpoint_frequency", "keep_checkpoints"):
            if getattr(self, name) < 1:
                problems.append(f"training.{name} must be >= 1")
        if problems:
            raise ValueError("Invalid training config: " + "; ".join(problems))


# the [training] settings that [finetune]'s recipe gives unless the command line sets them
RECIPE_KEYS = ("optimizer", "learning_rate", "warmup_steps", "lr_schedule", "autocast")


@dataclass(frozen=True)
class FinetuneSettings:
    """[finetune]: fine-tuning's own recipe, the frozen-biLM warm-up of a new softmax, the general
    held-out text and the domain words added to the vocabulary.

    optimizer, learning_rate, lr_warmup_steps, lr_schedule: the recipe ``finetune`` trains with in
        place of [training]'s (pretraining's from scratch), unless the command line (or the caller's
        overrides) sets ``training.optimizer``, ``training.learning_rate``, ``training.warmup_steps``
        or ``training.lr_schedule``; ``recipe = "training"`` takes [training]'s as they are.
    autocast (str): the recipe's precision: "auto" (bf16 autocast where the device has bf16
        arithmetic, ``fast.precision.BF16.pays_on``: a CPU with AVX512-BF16 or AMX, a GPU, and on a
        CPU where the training products run faster in bf16 than in float32, ``fast.train_payoff``;
        else "off"), or one of [training]'s ("off", "bf16", "fp16"); ``training.autocast`` on the command
        line takes precedence.
    warmup_steps, warmup_learning_rate: a new softmax (a start without one) trained alone first.
    general (Optional[str]): general held-out text scored before and after ("shipped": the
        package's, ``training.general``; a path; null: none).
    replay (Optional[str]): general text replayed among the domain's while training, one segment
        after every ``replay_every`` ("shipped": the package's, for an English model; a path; null: none).
    add_words (int): the domain's most frequent words outside the vocabulary (seen at least
        ``add_min_count`` times) added to it and to the softmax before training (0: none).
    """

    recipe: str = "finetune"
    optimizer: str = "adam"
    learning_rate: float = 0.0007
    lr_warmup_steps: int = 30
    lr_schedule: str = "constant"
    autocast: str = "auto"
    warmup_steps: int = 100
    warmup_learning_rate: float = 0.2
    general: Optional[str] = "shipped"
    replay: Optional[str] = "shipped"
    replay_every: int = 2
    add_words: int = 10000
    add_min_count: int = 3

    def __post_init__(self) -> None:
        problems = []
        if self.recipe not in ("finetune", "training"):
            problems.append(f"finetune.recipe must be 'finetune' or 'training', not {self.recipe!r}")
        if self.optimizer not in ("adagrad", "adam"):
            problems.append(f"finetune.optimizer must be 'adagrad' or 'adam', not {self.optimizer!r}")
        if self.lr_schedule not in ("constant", "inverse_sqrt"):
            problems.append(f"finetune.lr_schedule must be 'constant' or 'inverse_sqrt', not {self.lr_schedule!r}")
        if self.learning_rate <= 0:
            problems.append("finetune.learning_rate must be > 0")
        if self.autocast not in ("auto", *AUTOCASTS):
            problems.append(f"finetune.autocast must be one of {('auto', *AUTOCASTS)}, not {self.autocast!r}")
        if self.replay_every < 1:
            problems.append("finetune.replay_every must be >= 1")
        if self.replay is not None and str(self.replay).strip() in ("", "null", "None"):
            object.__setattr__(self, "replay", None)
        for name in ("lr_warmup_steps", "warmup_steps", "add_words"):
            if getattr(self, name) < 0:
                problems.append(f"finetune.{name} must be >= 0")
        if self.add_min_count < 1:
            problems.append("finetune.add_min_count must be >= 1")
        if self.general is not None and str(self.general).strip() in ("", "null", "None"):
            object.__setattr__(self, "general", None)
        if problems:
            raise ValueError("Invalid finetune config: " + "; ".join(problems))


@dataclass(frozen=True)
class ProbeSettings:
    """[probe]: a layer probe (``spacy_elmo.probes``) of the model at each evaluation, logged beside perplexity.

    train, eval: the task's files (None: its default data, see ``probes.task_data``); train_fraction:
    None for the task's default; max_sentences: at most this many train and eval items (0: all).
    """

    enabled: bool = False
    task: str = "upos"
    train: Optional[str] = None
    eval: Optional[str] = None
    train_fraction: Optional[float] = None
    max_sentences: int = 0

    def __post_init__(self) -> None:
        if self.task not in TASKS:
            raise ValueError(f"probe.task must be one of {list(TASKS)}, not {self.task!r}")
        if self.train_fraction is not None and not 0.0 < self.train_fraction <= 1.0:
            raise ValueError("probe.train_fraction must be in (0, 1]")
        if self.max_sentences < 0:
            raise ValueError("probe.max_sentences must be >= 0")


@dataclass(frozen=True)
class LMConfig:
    """Everything a pretraining or fine-tuning run needs, resolved from the .cfg."""

    train: Optional[str]
    dev: Optional[str]
    seed: int
    threads: int
    corpus: CorpusSettings
    vocab: VocabSettings
    model: BiLMConfig
    softmax: SoftmaxSettings
    training: TrainingSettings
    finetune: FinetuneSettings
    probe: ProbeSettings
    raw: Dict[str, Any]
    # the settings the caller or command line overrode ("training.learning_rate", ...)
    overridden: FrozenSet[str] = frozenset()


def _section(cls: type, values: Dict[str, Any], name: str) -> Any:
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ValueError(f"[{name}] has unknown settings {unknown}; known: {sorted(known)}")
    return cls(**values)


def load_lm_config(path: Union[str, Path], overrides: Optional[Dict[str, Any]] = None) -> LMConfig:
    """Read a biLM training .cfg. overrides: {"training.max_steps": 10, "paths.train": "..."}.

    Raises ValueError naming the bad setting (unknown section or key, invalid value).
    """
    try:
        config = Config().from_disk(path, overrides=overrides or {}, interpolate=True)
    except ConfigValidationError as err:
        raise ValueError(f"{path}: {str(err).strip()}") from err
    return lm_config_from_dict(dict(config), overridden=frozenset(overrides or {}))


def lm_config_from_dict(config: Dict[str, Any], *, overridden: FrozenSet[str] = frozenset()) -> LMConfig:
    unknown = sorted(set(config) - set(SECTIONS))
    if unknown:
        raise ValueError(f"unknown config sections {unknown}; known: {list(SECTIONS)}")
    paths = dict(config.get("paths", {}))
    system = dict(config.get("system", {}))
    model = dict(config.get("model", {}))
    model["filters"] = tuple(tuple(f) for f in model.get("filters", BiLMConfig.filters))
    return LMConfig(
        train=_optional_str(paths.get("train")),
        dev=_optional_str(paths.get("dev")),
        seed=int(system.get("seed", 0)),
        threads=int(system.get("threads", 0)),
        corpus=_section(CorpusSettings, dict(config.get("corpus", {})), "corpus"),
        vocab=_section(VocabSettings, dict(config.get("vocab", {})), "vocab"),
        model=_section(BiLMConfig, model, "model"),
        softmax=_section(SoftmaxSettings, dict(config.get("softmax", {})), "softmax"),
        training=_section(TrainingSettings, _autocast_renamed(dict(config.get("training", {}))), "training"),
        finetune=_section(FinetuneSettings, dict(config.get("finetune", {})), "finetune"),
        probe=_section(ProbeSettings, dict(config.get("probe", {})), "probe"),
        raw=_plain(config),
        overridden=frozenset(overridden),
    )


def _autocast_renamed(training: Dict[str, Any]) -> Dict[str, Any]:
    """[training] with its old key ``precision`` ("fp32" or "bf16") read as ``autocast`` ("off" or
    "bf16"), saying so with a DeprecationWarning; both at once are refused."""
    if "precision" not in training:
        return training
    if "autocast" in training:
        raise ValueError("[training] sets both autocast and precision (its former name): keep autocast only")
    warnings.warn(
        '[training] precision is now named autocast ("off" or "bf16"; precision "fp32" is autocast "off"); '
        "precision is still read, until the next release",
        DeprecationWarning,
        stacklevel=4,
    )
    old = training.pop("precision")
    training["autocast"] = AUTOCAST_WAS.get(old, old)
    return training


def _optional_str(value: Any) -> Optional[str]:
    if value is None or str(value).strip() in ("", "null", "None"):
        return None
    return str(value)


def _plain(value: Any) -> Any:
    """A JSON-serializable copy of the config (stored in checkpoints and the model's config.json)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value
