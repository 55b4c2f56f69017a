"""Where a biLM comes from: the one place that decides, for every entry point.

``locate_bilm`` is the decision; ``resolve_bilm`` loads what it found and ``load_bilm`` (the
public function) adds the inference fast path. The ``elmo`` component's ``initialize``,
``convert``, ``finetune`` (which also reads the vocabulary and softmax of one of our directories)
and the fuzzers all start here. A biLM comes from one of our model directories, a spaCy pipeline
directory holding one elmo component, a directory holding a published AllenNLP/bilm-tf pair
(options.json beside weights.hdf5, or model.hdf5 as NLPL archives name it), an ELMoForManyLangs
model directory (config.json beside token_embedder.pkl, encoder.pkl, char.dic: ``efml``; our
directories have a config.json too, but a model.safetensors and no .pkl), the pair given as two
files, a zip of a published model (NLPL's ELMo archives and the ELMoForManyLangs zips, as
published: ``archive``), a TensorFlow checkpoint or SavedModel as a folder, zip or .tar.gz
(bilm-tf's training folders, TF-Hub modules, DeepPavlov's archives: ``bilm_tf``), a published model by name
("small", "original", ...; or an ELMoForManyLangs language by ISO 639 code, "de", "ru", ...: see
``registry``), or, where nothing is given, the English biLM shipped inside the package. Where the
source says which language its model is for, ``BiLMSource.language`` records it. An existing path always wins over a name;
only a registered name downloads, once, into the cache (``download``); a path that does not exist
is an error naming it, never a download. Nothing is unpickled.
"""
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Union

from ..bilm import BiLM
from ..fast import DEFAULT_CHAR_CACHE_SIZE, optimize_for_inference
from .allennlp import load_allennlp
from .archive import archive_contents, fetch_archive, folder_language, load_archive
from .bilm_tf import load_bilm_tf
from .contributed import fetch_contributed
from .download import OPTIONS_NAME, WEIGHTS_NAME, fetch_published
from .efml import is_efml_directory, load_efml
from .errors import ModelFileError
from .native import CONFIG_NAME
from .native import WEIGHTS_NAME as NATIVE_WEIGHTS_NAME
from .native import load_native
from .registry import PUBLISHED_ARCHIVES, PUBLISHED_CONTRIBUTED, PUBLISHED_MODELS, PUBLISHED_TF_MODELS, published_names
from .tf_layouts import fetch_tf_model, needs_tf_reader

PathLike = Union[str, Path]
SHIPPED_NAME = "en_small"
SHIPPED_MODEL_DIR = Path(__file__).resolve().parent.parent / "models" / SHIPPED_NAME
PIPELINE_FACTORY = "elmo"
PIPELINE_CONFIG_NAME = "config.cfg"
# the weights of a published pair's directory: our cache's and bilm-tf's name, then NLPL's
PAIR_WEIGHTS_NAMES = (WEIGHTS_NAME, "model.hdf5")


@dataclass(frozen=True)
class BiLMSource:
    """Where a biLM comes from, as ``locate_bilm`` decided it: one of our directories, a
    published pair, or an ELMoForManyLangs directory.

    directory (Optional[Path]): our model directory (config.json + model.safetensors); one written
        by training also holds the vocabulary and softmax that continue language-model training.
    options (Optional[Path]): a published options.json, where there is no directory of ours.
    weights (Optional[Path]): the HDF5 weights that go with ``options``.
    efml (Optional[Path]): an ELMoForManyLangs model directory.
    archive (Optional[Path]): a zip of a published model (a pair, as NLPL's ELMo archives, or an
        ELMoForManyLangs model).
    language (Optional[str]): the language the model is for, where its source says (a published
        name's registry entry, an archive's meta.json); None where nothing says.
    name (Optional[str]): the published name the pair was fetched for (its softmax, where
        published, is fetched by ``lm_head.load_head`` when asked for); not compared: the files
        decide which biLM it is.
    tf (Optional[Path]): a TensorFlow checkpoint or SavedModel without HDF5 weights beside it (a
        folder, .zip or .tar.gz: ``bilm_tf``).
    """

    directory: Optional[Path] = None
    options: Optional[Path] = None
    weights: Optional[Path] = None
    efml: Optional[Path] = None
    archive: Optional[Path] = None
    language: Optional[str] = None
    name: Optional[str] = field(default=None, compare=False)
    tf: Optional[Path] = None

    def load(self) -> BiLM:
        """RETURNS (BiLM): the model on CPU in eval mode, with the plain computation."""
        if self.directory is not None:
            return load_native(self.directory)
        if self.efml is not None:
            return load_efml(self.efml)
        if self.archive is not None:
            return load_archive(self.archive)
        if self.tf is not None:
            return load_bilm_tf(self.tf)
        return load_allennlp(self.options, self.weights)


def shipped_model_dir() -> Path:
    """RETURNS (Path): the directory of the shipped English biLM (our safetensors format)."""
    return SHIPPED_MODEL_DIR


def locate_bilm(
    path: Optional[PathLike] = None,
    *,
    options: Optional[PathLike] = None,
    weights: Optional[PathLike] = None,
    what: str = "load_bilm",
) -> BiLMSource:
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
    RETURNS (BiLMSource): our directory, the published pair, or the EFML directory.
    """
    if path is not None:
        if options is not None or weights is not None:
            raise ValueError(f"{what}: give either a model directory, or options and weights, not both")
        local = Path(path).expanduser()
        return _local_source(local) if local.exists() else _published_source(str(path))
    if options is not None and weights is not None:
        return BiLMSource(options=Path(options), weights=Path(weights))
    if options is not None or weights is not None:
        raise ValueError(f"{what}: options and weights must both be given, together")
    return _shipped_source()


def _shipped_source() -> BiLMSource:
    """The English biLM shipped inside the package (no argument, or its name ``SHIPPED_NAME``)."""
    if not (shipped_model_dir() / NATIVE_WEIGHTS_NAME).is_file():
        raise ModelFileError(
            shipped_model_dir(),
            "the shipped English biLM is not installed with this copy of spacy-elmo; give weights "
            "explicitly ([initialize.components.elmo] options + weights, or model)",
        )
    return BiLMSource(directory=shipped_model_dir())


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
        package), or the name of a published model ("small",
        "medium", "original", "original-5.5b"), downloaded on first use into the cache
        (``$SPACY_ELMO_CACHE``; docs/download.md). A path that does not exist is an error.
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


def _local_source(path: Path) -> BiLMSource:
    """The biLM in an existing directory: an EFML one (its config.json has .pkl files or char.dic
    beside it, and no model.safetensors), ours, a pipeline's, then a published pair."""
    if path.is_file():
        if needs_tf_reader(path):  # a .tar.gz or zip of a TensorFlow checkpoint or SavedModel
            return BiLMSource(tf=path)
        if zipfile.is_zipfile(path) or path.suffix.lower() == ".zip":
            # a zip that is no model says what it holds (or why it is no readable zip)
            return BiLMSource(archive=path, language=archive_contents(path).language)
        raise ModelFileError(
            path, "a file, not a model directory or a zip of a published model; give a published pair as "
                  "options and weights"
        )
    if not path.is_dir():
        raise ModelFileError(path, "neither a file nor a directory")
    if is_efml_directory(path) and not (path / NATIVE_WEIGHTS_NAME).is_file():
        # a published zip unpacked by hand keeps NLPL's meta.json, which may name the language
        return BiLMSource(efml=path, language=folder_language(path))
    if (path / CONFIG_NAME).is_file() or (path / PIPELINE_CONFIG_NAME).is_file():
        return BiLMSource(directory=find_bilm_directory(path))
    if needs_tf_reader(path):
        return BiLMSource(tf=path)
    if (path / OPTIONS_NAME).is_file():
        for name in PAIR_WEIGHTS_NAMES:
            if (path / name).is_file():
                return BiLMSource(options=path / OPTIONS_NAME, weights=path / name)
        raise ModelFileError(
            path, f"{OPTIONS_NAME} but no {' or '.join(PAIR_WEIGHTS_NAMES)} beside it; name the weights so, "
                  "or give options and weights as two files"
        )
    raise ModelFileError(
        path, f"not a biLM: no {CONFIG_NAME} (a spacy-elmo model directory, or with .pkl files an "
              f"ELMoForManyLangs one), {PIPELINE_CONFIG_NAME} (a spaCy pipeline with an elmo component) or "
              f"{OPTIONS_NAME} + {WEIGHTS_NAME} (a published pair) in it",
    )


def _published_source(name: str) -> BiLMSource:
    """The published pair of a registered name, downloaded on first use. Nothing else downloads:
    a path that does not exist, or a name nobody published, is refused naming it."""
    if name == SHIPPED_NAME:
        return _shipped_source()
    if name in PUBLISHED_MODELS:
        options, weights = fetch_published(name)
        return BiLMSource(options=options, weights=weights, language="en", name=name)
    if name in PUBLISHED_ARCHIVES:
        return BiLMSource(efml=fetch_archive(name), language=name)
    if name in PUBLISHED_TF_MODELS:
        return BiLMSource(tf=fetch_tf_model(name), language=PUBLISHED_TF_MODELS[name].language)
    if name in PUBLISHED_CONTRIBUTED:
        options, weights = fetch_contributed(name)
        return BiLMSource(options=options, weights=weights, language=PUBLISHED_CONTRIBUTED[name].language, name=name)
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
