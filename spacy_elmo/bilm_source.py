"""Where the `elmo` component's biLM comes from, and the config block that describes it.

The files named in ``[initialize.components.elmo]`` (a published options + HDF5 pair, one of
our model directories, or a pipeline directory holding an elmo component), or else the English
biLM shipped with the package; and the ``[components.elmo.model]`` block written in the shape
of the weights actually imported (the stored options decide the shape on loading).
"""
from dataclasses import asdict
from pathlib import Path
from typing import Any, Dict, Optional, Union

from spacy import util
from spacy.language import Language

from .bilm import BiLM, BiLMConfig
from .io import ModelFileError, load_allennlp, load_native
from .io.native import CONFIG_NAME
from .shipped import load_shipped_bilm

PathLike = Union[str, Path]
ARCHITECTURE = "spacy-elmo.BiLM.v1"
FACTORY = "elmo"
NO_WEIGHTS = (
    "The '{name}' component has no biLM weights. Set [initialize.components.{name}] "
    "options = \"options.json\" and weights = \"weights.hdf5\" (a published AllenNLP/bilm-tf "
    "pair) or model = \"DIR\" (a spacy-elmo model directory, or a pipeline with an elmo "
    "component) and call nlp.initialize(); or call nlp.get_pipe('{name}').initialize(lambda: [], "
    "options=..., weights=...); or build a ready pipeline with `python -m spacy_elmo convert`."
)


def bilm_model_config(config: BiLMConfig, **settings: Any) -> Dict[str, Any]:
    """The ``[components.elmo.model]`` block that builds a biLM of this shape.

    settings: other arguments of the architecture (max_window, batch_size, ...).
    """
    shape = asdict(config)
    shape["filters"] = [list(f) for f in config.filters]
    return {"@architectures": ARCHITECTURE, **shape, **settings}


def record_shape(nlp: Language, name: str, config: BiLMConfig) -> None:
    """Write a biLM shape into the pipeline's config of the component ``name`` (its
    ``[components.NAME.model]`` block, when that block builds our architecture); other
    settings of the block are kept."""
    try:
        block = nlp.get_pipe_config(name).get("model")
    except ValueError:
        return
    if isinstance(block, dict) and block.get("@architectures") == ARCHITECTURE:
        block.update(bilm_model_config(config))


def initial_bilm(
    *, name: str = FACTORY, options: Optional[PathLike], weights: Optional[PathLike], model: Optional[PathLike]
) -> BiLM:
    """The biLM that ``Elmo.initialize`` imports: from the given files, or, where none is
    given, the English biLM shipped with the package (``spacy_elmo.shipped``).

    RETURNS (BiLM): loaded on CPU, in eval mode.
    """
    if model is not None:
        if options is not None or weights is not None:
            raise ValueError(f"[initialize.components.{name}]: give either model, or options and weights, not both")
        return load_native(find_bilm_directory(model))
    if options is not None and weights is not None:
        return load_allennlp(options, weights)
    if options is not None or weights is not None:
        raise ValueError(f"[initialize.components.{name}]: options and weights must be given together")
    try:
        return load_shipped_bilm()
    except ModelFileError as err:
        raise ValueError(f"{NO_WEIGHTS.format(name=name)} ({err})") from err


def find_bilm_directory(path: PathLike) -> Path:
    """The spacy-elmo model directory at ``path``: the path itself, or, for a spaCy pipeline
    directory, the ``model`` directory its single elmo component saved."""
    path = Path(path)
    if not (path / "config.cfg").is_file() or (path / CONFIG_NAME).is_file():
        return path  # load_native says what is wrong if it is not a model directory either
    config = util.load_config(path / "config.cfg", interpolate=False)
    components = config.get("components", {})
    names = [n for n in config.get("nlp", {}).get("pipeline", []) if components.get(n, {}).get("factory") == FACTORY]
    if len(names) != 1:
        found = f"components {names}" if names else "no elmo component"
        raise ModelFileError(path, f"a spaCy pipeline with {found}; give the directory DIR/<component>/model")
    return path / names[0] / "model"
