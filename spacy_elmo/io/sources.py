"""Where a biLM comes from, as a type: one class per format ``loading.locate_bilm`` recognises.

Every source knows how to load its biLM (``load``), the language-model head that goes with it
where there is one (``head``), the files its weights are read from (``files``: for records and
checksums, the main one first), the language it is for where its files or its registry entry
say (``language``), what it is in one line (``description``), and, for records, the name and
version it goes by (``name``, ``version``). Our directories also carry what training recorded
(``training_record``, ``training_vocabulary``). Code above ``io/`` calls these and never asks
which class it holds.

A folder and a zip holding the same files are one class, read by one rule: a published pair
(``PairBundleSource``: NLPL's entries, AllenNLP's files as downloaded, ...), an ELMoForManyLangs
model (``EFMLSource``), a TensorFlow layout (``TensorFlowSource``: a folder, zip or tar). They give
the same biLM, the same head and the same language whichever way they are packed.
"""
import json
import re
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Optional, Tuple

from ..bilm import BiLM
from .allennlp import find_pair, load_allennlp
from .archive import ARCHIVE_ERRORS, archive_contents, copy_member, folder_language, load_archive, zip_members
from .bilm_tf import load_bilm_tf, read_tf_head
from .download import Transfer, ensure_file
from .efml import ENCODER_NAME, TOKEN_EMBEDDER_NAME, load_efml
from .errors import ModelFileError
from .lm_head import (
    HDF5_SOFTMAX_NAME, VOCAB_NAME, LMHead, check_softmax_file, find_head_files, load_native_head,
    load_published_head, read_head_vocabulary,
)
from .native import WEIGHTS_NAME as NATIVE_WEIGHTS_NAME
from .native import load_native, read_config
from .registry import PUBLISHED_MODELS
from .tf_layouts import checkpoint_files, is_tf_model

SHIPPED_NAME = "en_small"
MODEL_CARD_NAME = "MODEL_CARD.md"
PIPELINE_META_NAME = "meta.json"
PIPELINE_CONFIG_NAME = "config.cfg"


class ModelSource:
    """A biLM's files in one format: what ``locate_bilm`` returns (see the module docstring).

    language (Optional[str]): the language the model is for, where its source says (a registry
        entry, an archive's or folder's meta.json, a pipeline's config); None where nothing says.
    name (Optional[str]): the name it goes by in records (a published or shipped name, a
        pipeline's ``LANG_NAME``); None where a path names it.
    """

    language: Optional[str] = None
    name: Optional[str] = None

    def load(self) -> BiLM:
        """RETURNS (BiLM): the model on CPU in eval mode, with the plain computation."""
        raise NotImplementedError

    def head(self, *, transfer: Optional[Transfer] = None) -> Optional[LMHead]:
        """The word softmax that goes with the biLM, with its vocabulary; a published name whose
        softmax was published downloads it on first use (``transfer``: retries, progress).

        RETURNS (Optional[LMHead]): the head, not yet checked against the biLM (``check_fits``);
            None where the source has none.
        """
        return None

    def files(self) -> Tuple[Path, ...]:
        """RETURNS (Tuple[Path, ...]): the files the biLM's weights are read from, the one whose
        digest names the model first."""
        raise NotImplementedError

    @property
    def description(self) -> str:
        """RETURNS (str): where the model is and what it is, in one line."""
        raise NotImplementedError

    def version(self) -> Optional[str]:
        """RETURNS (Optional[str]): the version its files or its registry entry give; None where none does."""
        return None

    def training_record(self) -> Optional[Dict[str, Any]]:
        """RETURNS (Optional[Dict[str, Any]]): what our training wrote beside the weights (config.json's
        ``extra``: stage, step, training_config, ...); None for a model our training did not write."""
        return None

    def training_vocabulary(self) -> Optional[Path]:
        """RETURNS (Optional[Path]): the vocabulary file our training wrote beside the weights; None elsewhere."""
        return None


@dataclass(frozen=True)
class NativeSource(ModelSource):
    """One of our model directories (config.json + model.safetensors): a training output, the
    shipped biLM (``shipped``), or the model an elmo component saved in a spaCy pipeline
    (``pipeline``)."""

    directory: Path
    language: Optional[str] = None
    name: Optional[str] = field(default=None, compare=False)
    pipeline: Optional[Path] = None
    shipped: bool = False

    @classmethod
    def of(cls, directory: Path, *, pipeline: Optional[Path] = None, shipped: bool = False) -> "NativeSource":
        """The source of ``directory``: the shipped biLM is English and named so; a pipeline's
        model takes its language from the pipeline's config and its name from its meta.json; a
        training output the language its training recorded (config.json's extra "lang": a
        fine-tuned model keeps its start's, a pretrained one the language its text was read in)."""
        if shipped:
            return cls(directory, "en", SHIPPED_NAME, shipped=True)
        if pipeline is None:
            return cls(directory, _recorded_language(directory))
        from spacy import util

        language = util.load_config(pipeline / PIPELINE_CONFIG_NAME, interpolate=False)["nlp"]["lang"]
        meta = _read_json(pipeline / PIPELINE_META_NAME)
        name = f"{meta.get('lang', 'xx')}_{meta.get('name', 'pipeline')}" if meta else None
        return cls(directory, language, name, pipeline)

    def load(self) -> BiLM:
        return load_native(self.directory)

    def head(self, *, transfer: Optional[Transfer] = None) -> Optional[LMHead]:
        return load_native_head(self.directory)

    def files(self) -> Tuple[Path, ...]:
        return (self.directory / NATIVE_WEIGHTS_NAME,)

    @property
    def description(self) -> str:
        if self.pipeline is not None:
            return f"{self.pipeline}: a spaCy pipeline with an elmo component"
        return f"{self.directory}: a model directory"

    def version(self) -> Optional[str]:
        if self.shipped:  # the version its model card names in its heading: "# NAME: ... (X.Y.Z)"
            card = self.directory / MODEL_CARD_NAME
            heading = card.read_text(encoding="utf-8").split("\n")[0] if card.is_file() else ""
            found = re.search(r"\((\d+\.\d+\.\d+)\)", heading)
            return found.group(1) if found else None
        if self.pipeline is not None and (self.pipeline / PIPELINE_META_NAME).is_file():
            return str(_read_json(self.pipeline / PIPELINE_META_NAME).get("version") or "") or None
        extra = self.training_record() or {}
        if extra.get("stage") and extra.get("step") is not None:
            return f"{extra['stage']} step {extra['step']}"
        return None

    def training_record(self) -> Optional[Dict[str, Any]]:
        try:
            return dict(read_config(self.directory).get("extra", {}))
        except ModelFileError:  # a damaged config.json is the loader's to report
            return {}

    def training_vocabulary(self) -> Optional[Path]:
        path = self.directory / VOCAB_NAME
        return path if path.is_file() else None


@dataclass(frozen=True)
class PairSource(ModelSource):
    """A published AllenNLP / bilm-tf pair given as its two files: options.json and the HDF5
    weights, given so or fetched by a registered name (AllenNLP's contributed models, SeqVec, ...).
    Its head is a softmax and vocabulary beside the weights (``lm_head.find_head_files``), else the
    softmax of a bilm-tf checkpoint in that folder."""

    options: Path
    weights: Path
    language: Optional[str] = None
    name: Optional[str] = field(default=None, compare=False)

    def load(self) -> BiLM:
        return load_allennlp(self.options, self.weights)

    def head(self, *, transfer: Optional[Transfer] = None) -> Optional[LMHead]:
        return head_in(self.weights.parent, self.weights.parent)

    def files(self) -> Tuple[Path, ...]:
        return (self.weights,)

    @property
    def description(self) -> str:
        return f"{self.options}: a published options.json + weights pair"


@dataclass(frozen=True)
class PublishedPairSource(PairSource):
    """One of AllenNLP's own biLMs by name (``registry.PUBLISHED_MODELS``), downloaded into the
    cache: its softmax and vocabulary, where published, are fetched beside it on first use."""

    def head(self, *, transfer: Optional[Transfer] = None) -> Optional[LMHead]:
        fetch_published_head(self.name or "", self.weights.parent, transfer=transfer)
        return super().head(transfer=transfer)

    def version(self) -> Optional[str]:
        return PUBLISHED_MODELS[self.name].shape if self.name in PUBLISHED_MODELS else None


@dataclass(frozen=True)
class PairBundleSource(ModelSource):
    """A folder or a zip holding a published pair with what came with it, as NLPL's repository
    ships its ELMo entries (options.json, model.hdf5, vocab.txt, meta.json, and in its "full"
    entries the bilm-tf checkpoint) and as AllenNLP's files are downloaded into a folder
    (``elmo_<shape>_options.json``, ``elmo_<shape>_weights.hdf5``, ``..._softmax_weights.hdf5``, a
    ``vocab*.txt``). The pair is found by base name (``allennlp.find_pair``: at a folder's top,
    anywhere in a zip); the head is a softmax and vocabulary among the files, else the
    checkpoint's softmax; the language is what meta.json records."""

    path: Path
    language: Optional[str] = None

    @classmethod
    def of(cls, path: Path) -> "PairBundleSource":
        """The bundle at ``path`` (a folder or zip), with the language its meta.json records."""
        language = archive_contents(path).language if path.is_file() else folder_language(path)
        return cls(path, language)

    def load(self) -> BiLM:
        if self.path.is_file():
            return load_archive(self.path)
        return load_allennlp(*self._pair())

    def _pair(self) -> Tuple[Path, Path]:
        found = find_pair((p.name for p in self.path.iterdir() if p.is_file()), self.path)
        if found is None:
            raise ModelFileError(self.path, "no options.json (or elmo_..._options.json) in it")
        return self.path / found[0], self.path / found[1]

    def head(self, *, transfer: Optional[Transfer] = None) -> Optional[LMHead]:
        return head_in(self.path, self.path) if self.path.is_dir() else _zip_head(self.path)

    def files(self) -> Tuple[Path, ...]:
        return (self.path,) if self.path.is_file() else (self._pair()[1],)

    @property
    def description(self) -> str:
        return f"{self.path}: a {'zip' if self.path.is_file() else 'folder'} holding a published pair"


@dataclass(frozen=True)
class EFMLSource(ModelSource):
    """An ELMoForManyLangs model: its directory (config.json, char.dic, word.dic, token_embedder.pkl,
    encoder.pkl), a zip of one as the NLPL repository publishes them, or a language's model by ISO
    code, downloaded and unpacked (``archive.fetch_archive``). Its files hold no word softmax."""

    path: Path
    language: Optional[str] = None
    name: Optional[str] = field(default=None, compare=False)

    @classmethod
    def of(cls, path: Path) -> "EFMLSource":
        """The model at ``path`` (a folder or zip), with the language its meta.json records."""
        language = archive_contents(path).language if path.is_file() else folder_language(path)
        return cls(path, language)

    def load(self) -> BiLM:
        return load_archive(self.path) if self.path.is_file() else load_efml(self.path)

    def files(self) -> Tuple[Path, ...]:
        if self.path.is_file():
            return (self.path,)
        embedder = self.path / TOKEN_EMBEDDER_NAME
        return (self.path / ENCODER_NAME, *((embedder,) if embedder.is_file() else ()))

    @property
    def description(self) -> str:
        what = "a zip of an ELMoForManyLangs model" if self.path.is_file() else "an ELMoForManyLangs model directory"
        return f"{self.path}: {what}"


@dataclass(frozen=True)
class TensorFlowSource(ModelSource):
    """A biLM in one of TensorFlow's layouts, read without TensorFlow (``bilm_tf``): bilm-tf's
    training checkpoint folder, NLPL's and DeepPavlov's archives of one, a TF-Hub module
    (google/elmo, DeepPavlov's ``elmo_*``); a folder, zip or .tar.gz alike. A training checkpoint
    holds the softmax, with the vocabulary beside it; a TF-Hub module has none."""

    path: Path
    language: Optional[str] = None
    name: Optional[str] = field(default=None, compare=False)

    def load(self) -> BiLM:
        return load_bilm_tf(self.path)

    def head(self, *, transfer: Optional[Transfer] = None) -> Optional[LMHead]:
        return read_tf_head(self.path)

    def files(self) -> Tuple[Path, ...]:
        return checkpoint_files(self.path)

    @property
    def description(self) -> str:
        return f"{self.path}: a TensorFlow checkpoint or SavedModel"


@dataclass(frozen=True)
class HubSource(ModelSource):
    """A model on the Hugging Face Hub (``hf:OWNER/REPO[@REVISION]``, ``hub.fetch_hub``): the source
    of its files in the cache, read by the rules of the layout they are in, named by its id and
    versioned by the commit it was fetched at."""

    inner: ModelSource
    name: Optional[str] = None
    commit: Optional[str] = None

    @property
    def language(self) -> Optional[str]:  # type: ignore[override]
        return self.inner.language

    def load(self) -> BiLM:
        return self.inner.load()

    def head(self, *, transfer: Optional[Transfer] = None) -> Optional[LMHead]:
        return self.inner.head(transfer=transfer)

    def files(self) -> Tuple[Path, ...]:
        return self.inner.files()

    @property
    def description(self) -> str:
        return f"{self.name} at {str(self.commit)[:12]} on the Hugging Face Hub ({self.inner.description})"

    def version(self) -> Optional[str]:
        return self.commit


def head_in(folder: Path, checkpoint: Path) -> Optional[LMHead]:
    """The head among a pair's companion files in ``folder`` (a published softmax and its
    vocabulary, ``lm_head.find_head_files``), else the softmax of the bilm-tf checkpoint in
    ``checkpoint`` (a folder or zip: NLPL's "full" entries keep it there), else None."""
    files = find_head_files(folder)
    if files is not None:
        return load_published_head(*files)
    return read_tf_head(checkpoint) if is_tf_model(checkpoint) else None


def _zip_head(path: Path) -> Optional[LMHead]:
    """``head_in`` for a zip: its softmax and vocabulary members (by base name, as a folder's top
    files) copied into a private temporary folder; the head's file is the zip."""
    try:
        with zipfile.ZipFile(path) as archive, tempfile.TemporaryDirectory(prefix="spacy-elmo-head-") as work:
            for info in zip_members(archive, path):
                base = Path(info.filename).name
                softmax = base.endswith(".hdf5") and "softmax" in base
                if not (softmax or base.startswith("vocab") and base.endswith(".txt")):
                    continue
                copy_member(archive, info, Path(work) / base, path)
            head = head_in(Path(work), path)
    except ARCHIVE_ERRORS as err:
        raise ModelFileError(path, f"not a readable zip archive ({err})") from err
    if head is not None and head.files != (path,):
        head.source, head.files = f"{path} ({' + '.join(f.name for f in head.files)})", (path,)
    return head


def fetch_published_head(name: str, directory: Path, *, transfer: Optional[Transfer] = None) -> None:
    """Download the softmax and vocabulary of AllenNLP's published model ``name`` into
    ``directory`` (beside its pair) as softmax.hdf5 and vocab.txt, unless there already; nothing
    for a model whose softmax was not published."""
    model = PUBLISHED_MODELS.get(name)
    if model is None or model.vocab_path is None:
        return
    ensure_file(model.vocab_url(), directory / VOCAB_NAME, sha256=model.vocab_sha256, check=read_head_vocabulary,
                transfer=transfer)
    ensure_file(model.softmax_url(), directory / HDF5_SOFTMAX_NAME, sha256=model.softmax_sha256,
                check=check_softmax_file, transfer=transfer)


def _read_json(path: Path) -> Dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _recorded_language(directory: Path) -> Optional[str]:
    """The language a model directory's training recorded (config.json's extra "lang"), if any."""
    try:
        language = read_config(directory).get("extra", {}).get("lang")
    except ModelFileError:  # a damaged config.json is the loader's to report
        return None
    return language if isinstance(language, str) and language else None
