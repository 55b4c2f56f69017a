"""Where a biLM comes from: the one place that decides, for every entry point.

``locate_bilm`` is the decision: it returns a source (``sources``: one class per format, which
loads the biLM, its head where there is one, and knows its files, language and description);
``resolve_bilm`` loads what it found, ``load_bilm`` (the public function) adds the inference fast
path and ``load_lm_head`` the head. The ``elmo`` component's ``initialize``, ``convert``,
``finetune``, ``evaluate``, the run records and the fuzzers all start here. A biLM comes from one
of our model directories, a spaCy pipeline directory holding one elmo component, a folder or zip
holding a published AllenNLP/bilm-tf pair (options.json beside weights.hdf5, or model.hdf5 as NLPL
archives name it, or the names AllenNLP serves them under: ``allennlp.find_pair``), an
ELMoForManyLangs model directory or zip (config.json beside token_embedder.pkl, encoder.pkl,
char.dic: ``efml``; our directories have a config.json too, but a model.safetensors and no .pkl),
the pair given as two files, a TensorFlow checkpoint or SavedModel as a folder, zip or .tar.gz
(bilm-tf's training folders, TF-Hub modules, DeepPavlov's archives: ``bilm_tf``), a published
model by name ("small", "original", ...; or an ELMoForManyLangs language by ISO 639 code, "de",
"ru", ...: see ``registry``), or, where nothing is given, the English biLM shipped inside the
package, or a repository on the Hugging Face Hub, ``hf:OWNER/REPO[@REVISION]`` (``hub``: any of
the folder layouts above, in huggingface_hub's cache). An existing path always wins over a name;
only a registered name or a Hub id downloads, once, into the cache (``download``, ``hub``); a path
that does not exist is an error naming it, never a download.
Nothing is unpickled.
"""
import zipfile
from pathlib import Path
from typing import Optional, Tuple, Union

import torch

from ..bilm import BiLM
from ..fast import DEFAULT_CHAR_CACHE_SIZE, optimize_for_inference
from .allennlp import OPTIONS_NAME, find_pair
from .archive import ALLENNLP, archive_contents, fetch_archive
from .contributed import fetch_contributed
from .download import fetch_published
from .efml import is_efml_directory
from .hub import fetch_hub, is_hub_id
from .errors import ModelFileError
from .limits import model_bytes_cap
from .lm_head import HDF5_SOFTMAX_NAME, SOFTMAX_NAME, VOCAB_NAME, LMHead
from .native import CONFIG_NAME
from .native import WEIGHTS_NAME as NATIVE_WEIGHTS_NAME
from .registry import PUBLISHED_ARCHIVES, PUBLISHED_CONTRIBUTED, PUBLISHED_MODELS, PUBLISHED_TF_MODELS, published_names
from .sources import (
    PIPELINE_CONFIG_NAME, SHIPPED_NAME, EFMLSource, HubSource, ModelSource, NativeSource, PairBundleSource,
    PairSource, PublishedPairSource, TensorFlowSource,
)
from .tf_layouts import fetch_tf_model, needs_tf_reader

PathLike = Union[str, Path]
SHIPPED_MODEL_DIR = Path(__file__).resolve().parent.parent / "models" / SHIPPED_NAME
PIPELINE_FACTORY = "elmo"


def locate_bilm(
    path: Optional[PathLike] = None,
    *,
    options: Optional[PathLike] = None,
    weights: Optional[PathLike] = None,
    what: str = "load_bilm",
) -> ModelSource:
    """Decide where the biLM the arguments name comes from. Nothing is loaded, but a published model
    asked for by name is downloaded into the cache on first use (``download.fetch_published``).

    path (Optional[PathLike]): an existing directory: ours, a spaCy pipeline with one elmo component
        (its saved model), one holding a published pair (options.json + weights.hdf5 or
        model.hdf5), or an ELMoForManyLangs model directory. Where no such path exists, the name
        of a published model (``registry``); a string that looks like a path (a separator, a
        leading "." or "~", a file extension) is refused, naming it.
    options (Optional[PathLike]): a published options.json (with ``weights``).
    weights (Optional[PathLike]): a published HDF5 weights file (with ``options``).
    With none of them, the English biLM shipped with the package.
    what (str): who asks, for the error messages (e.g. "[initialize.components.elmo]").
    RETURNS (ModelSource): one of the classes of ``sources``, which loads the biLM and its head.
    """
    if path is not None:
        if options is not None or weights is not None:
            raise ValueError(f"{what}: give either a model directory, or options and weights, not both")
        local = Path(path).expanduser()
        return _local_source(local) if local.exists() else _published_source(str(path))
    if options is not None and weights is not None:
        return PairSource(Path(options), Path(weights))
    if options is not None or weights is not None:
        raise ValueError(f"{what}: options and weights must both be given, together")
    return _shipped_source()


def _shipped_source() -> NativeSource:
    """The English biLM shipped inside the package (no argument, or its name ``SHIPPED_NAME``)."""
    if not (shipped_model_dir() / NATIVE_WEIGHTS_NAME).is_file():
        raise ModelFileError(
            shipped_model_dir(),
            "the shipped English biLM is not installed with this copy of spacy-elmo; give weights "
            "explicitly ([initialize.components.elmo] options + weights, or model)",
        )
    return NativeSource.of(shipped_model_dir(), shipped=True)


def resolve_bilm(
    path: Optional[PathLike] = None,
    *,
    options: Optional[PathLike] = None,
    weights: Optional[PathLike] = None,
    what: str = "load_bilm",
) -> BiLM:
    """The biLM the arguments name (see ``locate_bilm``), loaded on CPU in eval mode with the plain
    computation.

    RETURNS (BiLM): the model.
    """
    return locate_bilm(path, options=options, weights=weights, what=what).load()


def load_bilm(
    path: Optional[PathLike] = None,
    *,
    options: Optional[PathLike] = None,
    weights: Optional[PathLike] = None,
    optimize: bool = True,
    max_model_bytes: Optional[int] = None,
    device: Union[str, torch.device] = "cpu",
) -> BiLM:
    """Load a biLM from our directory format, a spaCy pipeline, a published options + HDF5 pair, or
    an ELMoForManyLangs model directory.

    path (Optional[PathLike]): a directory written by ``save_bilm`` (or a pipeline's training output),
        a spaCy pipeline directory with one elmo component, a directory holding a published
        options.json + weights.hdf5 (or model.hdf5), an ELMoForManyLangs model directory
        (config.json, char.dic, token_embedder.pkl, ...; its .pkl files are read as tensors
        only), a zip of a published model (NLPL's ELMo archives, ELMoForManyLangs' zips as
        published), a TensorFlow checkpoint or SavedModel (bilm-tf's checkpoint folder, a TF-Hub
        module, DeepPavlov's .tar.gz; read without TensorFlow), "en_small" (the biLM shipped with the
        package), the name of a published model ("small",
        "medium", "original", "original-5.5b"), downloaded on first use into the cache
        (``$SPACY_ELMO_CACHE``; docs/download.md), or a model on the Hugging Face Hub,
        "hf:OWNER/REPO" or "hf:OWNER/REPO@REVISION" (``hub``: the hub extra; into huggingface_hub's
        cache, each file checked against the size and digest the Hub states). A path that does not
        exist is an error.
    options (Optional[PathLike]): a published options.json (with ``weights``).
    weights (Optional[PathLike]): a published HDF5 weights file (with ``options``).
    With no argument, the English biLM shipped with the package.
    optimize (bool): apply the inference fast path the ``elmo`` component uses
        (``optimize_for_inference`` with a 20,000-token char-CNN cache: lockstep directions,
        outputs within about 2e-6 of the plain computation). False keeps the plain float32
        computation bit for bit.
    max_model_bytes (Optional[int]): refuse a model whose parameters need more bytes than this
        (default: ``$SPACY_ELMO_MAX_MODEL_BYTES``, else 2 GiB; ``limits``), checked against what its
        files declare before anything is built.
    device (Union[str, torch.device]): where the model runs ("cpu", "cuda", "cuda:1"); its inputs go
        there, and ``embed`` hands back numpy arrays on the CPU wherever it ran.

    RETURNS (BiLM): the model in eval mode on ``device``; call ``.embed(sentences)``.
    """
    with model_bytes_cap(max_model_bytes):
        bilm = resolve_bilm(path, options=options, weights=weights)
    bilm.to(device)
    if optimize:
        optimize_for_inference(bilm, char_cache_size=DEFAULT_CHAR_CACHE_SIZE)
    return bilm


def shipped_model_dir() -> Path:
    """RETURNS (Path): the directory of the shipped English biLM (our safetensors format)."""
    return SHIPPED_MODEL_DIR


def load_lm_head(
    model: Optional[PathLike] = None, *, options: Optional[PathLike] = None, weights: Optional[PathLike] = None,
    what: str = "load_lm_head",
) -> Tuple[BiLM, LMHead]:
    """A biLM with its head, from anything ``locate_bilm`` takes (none: the shipped biLM), or from a
    published pair given as ``options`` + ``weights`` (its softmax and vocabulary beside the weights).

    RETURNS (Tuple[BiLM, LMHead]): the biLM (plain computation, eval mode) and its head, checked to fit.
    """
    source = locate_bilm(model, options=options, weights=weights, what=what)
    bilm = source.load()
    head = source.head()
    if head is None:
        raise ModelFileError(
            str(model or weights or "the shipped biLM"), "no softmax with it: our directories hold vocab.txt + "
            f"{SOFTMAX_NAME}; a published pair needs {HDF5_SOFTMAX_NAME} + {VOCAB_NAME} beside it (or a published "
            "name whose softmax was published: original, original-5.5b; or a bilm-tf checkpoint); or fine-tune it "
            "first, which trains a new softmax on your text"
        )
    return bilm, head.check_fits(bilm)


def find_bilm_directory(path: PathLike) -> Path:
    """The spacy-elmo model directory at ``path``: the path itself, or, for a spaCy pipeline
    directory, the ``model`` directory its single elmo component saved."""
    path = Path(path)
    if not (path / PIPELINE_CONFIG_NAME).is_file() or (path / CONFIG_NAME).is_file():
        return path  # load_native says what is wrong if it is not a model directory either
    from spacy import util

    config = util.load_config(path / PIPELINE_CONFIG_NAME, interpolate=False)
    components = config.get("components", {})
    pipeline = config.get("nlp", {}).get("pipeline", [])
    names = [n for n in pipeline if components.get(n, {}).get("factory") == PIPELINE_FACTORY]
    if len(names) != 1:
        found = f"components {names}" if names else "no elmo component"
        raise ModelFileError(path, f"a spaCy pipeline with {found}; give the directory DIR/<component>/model")
    return path / names[0] / "model"


def _local_source(path: Path) -> ModelSource:
    """The biLM at an existing path: a TensorFlow archive or a zip of a published model; a
    directory: an EFML one (its config.json has .pkl files or char.dic beside it, and no
    model.safetensors), ours, a pipeline's, a TensorFlow layout, then a published pair."""
    if path.is_file():
        if needs_tf_reader(path):  # a .tar.gz or zip of a TensorFlow checkpoint or SavedModel
            return TensorFlowSource(path)
        if zipfile.is_zipfile(path) or path.suffix.lower() == ".zip":
            # a zip that is no model says what it holds (or why it is no readable zip)
            family = archive_contents(path).family
            return PairBundleSource.of(path) if family == ALLENNLP else EFMLSource.of(path)
        raise ModelFileError(
            path, "a file, not a model directory or a zip of a published model; give a published pair as "
                  "options and weights"
        )
    if not path.is_dir():
        raise ModelFileError(path, "neither a file nor a directory")
    if is_efml_directory(path) and not (path / NATIVE_WEIGHTS_NAME).is_file():
        return EFMLSource.of(path)  # a published zip unpacked by hand keeps NLPL's meta.json
    if (path / CONFIG_NAME).is_file() or (path / PIPELINE_CONFIG_NAME).is_file():
        directory = find_bilm_directory(path)
        shipped = directory.resolve() == shipped_model_dir().resolve()
        return NativeSource.of(directory, pipeline=path if directory != path else None, shipped=shipped)
    if needs_tf_reader(path):
        return TensorFlowSource(path)
    if find_pair((p.name for p in path.iterdir() if p.is_file()), path) is not None:
        return PairBundleSource.of(path)
    raise ModelFileError(
        path, f"not a biLM: no {CONFIG_NAME} (a spacy-elmo model directory, or with .pkl files an "
              f"ELMoForManyLangs one), {PIPELINE_CONFIG_NAME} (a spaCy pipeline with an elmo component) or "
              f"{OPTIONS_NAME} + weights.hdf5 (a published pair; or AllenNLP's elmo_..._options.json + "
              "elmo_..._weights.hdf5) in it",
    )


def _published_source(name: str) -> ModelSource:
    """The source of a registered name, downloaded on first use. Nothing else downloads: a path
    that does not exist, or a name nobody published, is refused naming it."""
    if name == SHIPPED_NAME:
        return _shipped_source()
    if is_hub_id(name):
        snapshot = fetch_hub(name)
        return HubSource(_local_source(snapshot.model_path()), name=str(snapshot.hub_id), commit=snapshot.commit)
    if name in PUBLISHED_MODELS:
        return PublishedPairSource(*fetch_published(name), language="en", name=name)
    if name in PUBLISHED_ARCHIVES:
        return EFMLSource(fetch_archive(name), language=name, name=name)
    if name in PUBLISHED_TF_MODELS:
        return TensorFlowSource(fetch_tf_model(name), language=PUBLISHED_TF_MODELS[name].language, name=name)
    if name in PUBLISHED_CONTRIBUTED:
        return PairSource(*fetch_contributed(name), language=PUBLISHED_CONTRIBUTED[name].language, name=name)
    names = f"{SHIPPED_NAME} (shipped); {published_names()}"
    if _looks_like_path(name):
        raise ModelFileError(
            name, f"not found: no such file or directory; check the path (published model names: {names})"
        )
    raise ModelFileError(name, f"not found: neither an existing path nor a published model name ({names})")


def _looks_like_path(text: str) -> bool:
    """Whether ``text`` was meant as a path rather than a name: a separator, a leading "." or "~",
    or a file extension (registered names are checked first: "original-5.5b" is a name)."""
    return "/" in text or "\\" in text or text.startswith((".", "~")) or bool(Path(text).suffix)
