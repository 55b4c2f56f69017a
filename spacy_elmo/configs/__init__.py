"""The downstream training configs, installed with the package (``TASK-elmo.cfg``; the checkout's
``configs/`` links to them), and the one a user starts from for a named biLM (``init-config``).

The recipe is the same for every biLM: what depends on its size is decided when it runs. Its
frozen layer cache (``frozen_cache_mb = null``) takes a share of the memory available once the
weights are loaded and names, when it is too small, the size that would hold the corpus at the
biLM's bytes a token; its torch threads (``threads = 0``) follow the size of its LSTM steps on
the machine it runs on (``layers.torch_threads``). The config's header states both for the named
biLM where its shape is known without loading it.
"""
import json
import re
from importlib import resources
from pathlib import Path
from typing import Optional

from thinc.api import Config

from ..bilm import BiLMConfig
from ..io.loading import SHIPPED_MODEL_DIR
from ..io.registry import PUBLISHED_ARCHIVES, PUBLISHED_CONTRIBUTED, PUBLISHED_MODELS, PUBLISHED_TF_MODELS, published_names
from ..io.sources import SHIPPED_NAME
from ..layers.torch_threads import threads_for

__all__ = ["TASKS", "config_text", "downstream_config", "known_shape"]

TASKS = ("ner", "tagger", "textcat")
# AllenNLP's name for a published shape: layers x cells _ projection _ ...
PUBLISHED_SHAPE = re.compile(r"^(\d+)x(\d+)_(\d+)_")
UNSET_MODEL = "elmo = null"


def config_text(task: str) -> str:
    """RETURNS (str): the installed config of ``task`` with ELMo (one of ``TASKS``), as shipped."""
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}: the configs are for {', '.join(TASKS)}")
    return resources.files(__name__).joinpath(f"{task}-elmo.cfg").read_text(encoding="utf-8")


def downstream_config(task: str, model: Optional[str] = None) -> str:
    """The recommended training config of ``task`` for a biLM: the installed config with its
    ``[paths] elmo`` set to ``model``, headed by what the biLM's size means for the run.

    task (str): "ner", "tagger" or "textcat".
    model (Optional[str]): anything ``load_bilm`` takes by name or path (not loaded, nor downloaded,
        here); None: the shipped English biLM.
    RETURNS (str): the config, ready for ``python -m spacy train CONFIG --paths.train ... --paths.dev ...``.
    """
    name = SHIPPED_NAME if model is None else model
    if not _is_known_source(name):
        raise ValueError(
            f"{name}: neither an existing path nor a published model name ({SHIPPED_NAME} (shipped); {published_names()})"
        )
    text = config_text(task)
    if text.count(UNSET_MODEL) != 1:
        raise RuntimeError(f"the installed {task}-elmo.cfg has no single '{UNSET_MODEL}' line to set")
    filled = text.replace(UNSET_MODEL, f"elmo = {json.dumps(name)}")
    if Config().from_str(filled, interpolate=False)["paths"]["elmo"] != name:
        raise RuntimeError(f"the installed {task}-elmo.cfg's '{UNSET_MODEL}' is not [paths] elmo")
    return _header(task, name) + _body(filled)


def _body(text: str) -> str:
    """The config without the installed file's leading comments, which speak of the checkout's
    ``configs/`` and of a ``DIR`` the written config has already set (``_header`` says what applies)."""
    lines = text.splitlines(keepends=True)
    first = next((i for i, line in enumerate(lines) if line.strip() and not line.lstrip().startswith("#")), len(lines))
    return "\n" + "".join(lines[first:])


def _is_known_source(name: str) -> bool:
    published = (PUBLISHED_MODELS, PUBLISHED_ARCHIVES, PUBLISHED_TF_MODELS, PUBLISHED_CONTRIBUTED)
    return name == SHIPPED_NAME or any(name in names for names in published) or Path(name).expanduser().exists()


def known_shape(name: str) -> Optional[BiLMConfig]:
    """The shape of a biLM named by ``name`` where it is known without reading its weights: a
    published AllenNLP model (by its shape's name), the shipped biLM, our directories and folders
    holding a published options.json. RETURNS (Optional[BiLMConfig]): None where it is not."""
    if name in PUBLISHED_MODELS:
        match = PUBLISHED_SHAPE.match(PUBLISHED_MODELS[name].shape)
        if match:
            n_layers, dim, projection = (int(group) for group in match.groups())
            return BiLMConfig(n_layers=n_layers, dim=dim, projection_dim=projection)
        return None
    folder = SHIPPED_MODEL_DIR if name == SHIPPED_NAME else Path(name).expanduser()
    for file_name, key in (("config.json", "options"), ("options.json", None)):
        path = folder / file_name
        if path.is_file():
            data = json.loads(path.read_text(encoding="utf-8"))
            options = data.get(key) if key else data
            if isinstance(options, dict) and "lstm" in options:
                return BiLMConfig.from_options(options)
    return None


def _header(task: str, name: str) -> str:
    lines = [f"# {task} with ELMo from {name}: python -m spacy_elmo init-config {task} --model {name}"]
    shape = known_shape(name)
    if shape is None:
        lines.append("# frozen_cache_mb = null and threads = 0 follow this biLM's size when it runs (docs/downstream.md)")
    else:
        per_token = shape.n_output_layers * shape.output_dim * 4
        lines += [
            f"# its frozen cache takes {per_token / 1024:g} KB a token ({shape.n_output_layers} layers x {shape.output_dim} x 4 bytes):",
            "#   frozen_cache_mb = null takes a quarter of the available memory and warns with the size of the corpus;",
            f"# threads = 0 gives its calls up to {threads_for(shape)} torch thread(s) on this machine",
            "#   (one per 2 million weights an LSTM step reads, at most the cores the load leaves free)",
        ]
    lines += [
        "# feature-based: the biLM is frozen; fine-tune it with --components.elmo.model.trainable true",
        "# train: python -m spacy train CONFIG --paths.train train.spacy --paths.dev dev.spacy --output OUT",
    ]
    return "\n".join(lines) + "\n"
