"""Where a biLM comes from: the one place that decides, for every entry point.

``load_bilm`` (the public function), the ``elmo`` component's ``initialize`` and ``convert`` all
call ``resolve_bilm``: one of our model directories (or a spaCy pipeline directory holding an
elmo component), a published AllenNLP/bilm-tf options + HDF5 pair, a published model by name
("small", "original", ...: see ``registry``), or, where nothing is given, the English biLM
shipped inside the package. Only a name downloads, once, into the cache (``download``); an
existing path always wins over a name. Nothing is unpickled.
"""
from pathlib import Path
from typing import Optional, Union

from ..bilm import BiLM
from ..fast import optimize_for_inference
from .allennlp import load_allennlp
from .download import fetch_published
from .errors import ModelFileError
from .native import CONFIG_NAME, load_native

PathLike = Union[str, Path]
SHIPPED_MODEL_DIR = Path(__file__).resolve().parent.parent / "models" / "en_small"
# the elmo component's char-CNN cache size, shared so every entry point runs alike
DEFAULT_CHAR_CACHE_SIZE = 20000
PIPELINE_FACTORY = "elmo"


def shipped_model_dir() -> Path:
    """RETURNS (Path): the directory of the shipped English biLM (our safetensors format)."""
    return SHIPPED_MODEL_DIR


def load_shipped_bilm() -> BiLM:
    """Load the shipped English biLM, with an error that says what to do if the package lacks it."""
    path = shipped_model_dir()
    if not (path / "model.safetensors").is_file():
        raise ModelFileError(
            path,
            "the shipped English biLM is not installed with this copy of spacy-elmo; give weights "
            "explicitly ([initialize.components.elmo] options + weights, or model)",
        )
    return load_native(path)


def resolve_bilm(
    path: Optional[PathLike] = None,
    *,
    options: Optional[PathLike] = None,
    weights: Optional[PathLike] = None,
    what: str = "load_bilm",
) -> BiLM:
    """The biLM the arguments name, loaded on CPU in eval mode with the plain computation.

    path (Optional[PathLike]): our model directory, or a spaCy pipeline directory with one elmo
        component (its saved model is used); where no such path exists, the name of a published
        model, downloaded into the cache on first use (``download.fetch_published``).
    options, weights (Optional[PathLike]): a published options.json and HDF5 weights, together.
    With none of them, the English biLM shipped with the package.
    what (str): who asks, for the error messages (e.g. "[initialize.components.elmo]").
    """
    if path is not None:
        if options is not None or weights is not None:
            raise ValueError(f"{what}: give either a model directory, or options and weights, not both")
        if not Path(path).exists():
            return load_allennlp(*fetch_published(str(path)))
        return load_native(find_bilm_directory(path))
    if options is not None and weights is not None:
        return load_allennlp(options, weights)
    if options is not None or weights is not None:
        raise ValueError(f"{what}: options and weights must both be given, together")
    return load_shipped_bilm()


def load_bilm(
    path: Optional[PathLike] = None,
    *,
    options: Optional[PathLike] = None,
    weights: Optional[PathLike] = None,
    optimize: bool = True,
) -> BiLM:
    """Load a biLM from our directory format, or from a published options + HDF5 pair.

    path (Optional[PathLike]): a directory written by ``save_bilm`` (or a pipeline's training output),
        or the name of a published model ("small", "medium", "original", "original-5.5b"), downloaded
        on first use into the cache (``$SPACY_ELMO_CACHE``; docs/download.md).
    options (Optional[PathLike]): a published options.json (with ``weights``).
    weights (Optional[PathLike]): a published HDF5 weights file (with ``options``).
    With no argument, the English biLM shipped with the package.
    optimize (bool): apply the inference fast path the ``elmo`` component uses
        (``optimize_for_inference`` with a 20,000-token char-CNN cache: lockstep directions,
        outputs within about 2e-6 of the plain computation). False keeps the plain float32
        computation bit for bit.

    RETURNS (BiLM): the model in eval mode on CPU; call ``.embed(sentences)``.
    """
    bilm = resolve_bilm(path, options=options, weights=weights)
    if optimize:
        optimize_for_inference(bilm, char_cache_size=DEFAULT_CHAR_CACHE_SIZE)
    return bilm


def find_bilm_directory(path: PathLike) -> Path:
    """The spacy-elmo model directory at ``path``: the path itself, or, for a spaCy pipeline
    directory, the ``model`` directory its single elmo component saved."""
    path = Path(path)
    if not (path / "config.cfg").is_file() or (path / CONFIG_NAME).is_file():
        return path  # load_native says what is wrong if it is not a model directory either
    from spacy import util

    config = util.load_config(path / "config.cfg", interpolate=False)
    components = config.get("components", {})
    pipeline = config.get("nlp", {}).get("pipeline", [])
    names = [n for n in pipeline if components.get(n, {}).get("factory") == PIPELINE_FACTORY]
    if len(names) != 1:
        found = f"components {names}" if names else "no elmo component"
        raise ModelFileError(path, f"a spaCy pipeline with {found}; give the directory DIR/<component>/model")
    return path / names[0] / "model"
