"""Published biLMs packed as a zip: the NLPL repository's ELMo archives, bilm-tf pairs zipped, and
the ELMoForManyLangs zips the registry names by language (``fetch_archive``: downloaded once and
unpacked into the cache).

An NLPL ELMo entry (http://vectors.nlpl.eu/repository/) is one zip holding ``options.json``,
``model.hdf5`` and ``vocab.txt`` (the training vocabulary, which the biLM itself does not need),
often with ``meta.json`` describing the corpus and its language. The weights are bilm-tf's HDF5,
read by ``allennlp.load_allennlp``. Members may sit in a folder inside the zip.

Only the members named here are read, by their base names, into a private temporary folder
that is removed afterwards: a member's path never decides where anything is written, and
nothing in the archive is executed or unpickled.
"""
import json
import os
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Optional, Union

from ..bilm import BiLM
from .allennlp import load_allennlp
from ..cache_dir import cache_dir
from .download import Transfer, ensure_file, file_sha256, recorded_sha256
from .errors import ModelFileError
from .registry import published_archive

PathLike = Union[str, Path]
OPTIONS = "options.json"
WEIGHTS = ("model.hdf5", "weights.hdf5")
META = "meta.json"
# biLM weights are at most a few GB; a member claiming more is not one (or a zip bomb)
MAX_MEMBER_BYTES = 8 * 2**30


@dataclass(frozen=True)
class ArchiveContents:
    """What a published biLM zip holds: the members' names inside it and the language its
    ``meta.json`` records (an ISO 639 code, or None)."""

    options: str
    weights: str
    language: Optional[str]


def is_bilm_archive(path: PathLike) -> bool:
    """Whether ``path`` is a zip file holding an options.json and a .hdf5 weights file."""
    path = Path(path)
    if not path.is_file() or not zipfile.is_zipfile(path):
        return False
    try:
        archive_contents(path)
    except ModelFileError:
        return False
    return True


def archive_contents(path: PathLike) -> ArchiveContents:
    """The members of a published biLM zip. Raises ModelFileError naming what is missing."""
    try:
        with zipfile.ZipFile(path) as archive:
            members = {Path(info.filename).name: info for info in archive.infolist() if not info.is_dir()}
            meta = _read_meta(archive, members.get(META))
    except (zipfile.BadZipFile, OSError) as error:
        raise ModelFileError(path, f"not a readable zip archive ({error})") from error
    weights = next((members[name] for name in WEIGHTS if name in members), None)
    if OPTIONS not in members or weights is None:
        found = ", ".join(sorted(members)) or "nothing"
        raise ModelFileError(path, f"a biLM archive holds {OPTIONS} and {' or '.join(WEIGHTS)}; this one holds {found}")
    return ArchiveContents(members[OPTIONS].filename, weights.filename, _language(meta))


def load_archive(path: PathLike) -> BiLM:
    """Load the biLM in a published zip (see the module docstring).

    RETURNS (BiLM): the model, on CPU in eval mode, with the plain computation.
    """
    contents = archive_contents(path)
    with zipfile.ZipFile(path) as archive, tempfile.TemporaryDirectory(prefix="spacy-elmo-archive-") as work:
        extracted: Dict[str, Path] = {}
        for role, member in (("options", contents.options), ("weights", contents.weights)):
            info = archive.getinfo(member)
            if info.file_size > MAX_MEMBER_BYTES:
                raise ModelFileError(path, f"{member} claims {info.file_size} bytes, more than a biLM's weights")
            target = Path(work) / Path(member).name  # the base name only: no path from the archive
            copy_member(archive, info, target, path)
            extracted[role] = target
        bilm = load_allennlp(extracted["options"], extracted["weights"])
    return bilm


def copy_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo, target: Path, path: PathLike) -> None:
    """Stream one member of the zip at ``path`` into ``target``; a damaged member (a CRC mismatch
    included) is a ModelFileError naming the zip, and leaves no partial ``target``."""
    try:
        with archive.open(info) as source, open(target, "wb") as sink:
            while chunk := source.read(1 << 20):
                sink.write(chunk)
    except (zipfile.BadZipFile, OSError) as error:
        target.unlink(missing_ok=True)
        raise ModelFileError(path, f"{info.filename} could not be read from the archive ({error})") from error


def archive_language(path: PathLike) -> Optional[str]:
    """The language the archive's meta.json records (an ISO 639 code), or None."""
    return archive_contents(path).language


def _read_meta(archive: zipfile.ZipFile, info: Optional[zipfile.ZipInfo]) -> Optional[dict]:
    if info is None or info.file_size > 1 << 20:
        return None
    try:
        meta = json.loads(archive.read(info).decode("utf-8"))
    except (ValueError, UnicodeDecodeError):
        return None  # a damaged meta.json does not keep the weights from loading
    return meta if isinstance(meta, dict) else None


def _language(meta: Optional[dict]) -> Optional[str]:
    """NLPL's meta.json names the language in ``corpus[i].language`` (or at the top level)."""
    if not meta:
        return None
    candidates = [meta.get("language")]
    corpus = meta.get("corpus")
    for entry in corpus if isinstance(corpus, list) else [corpus]:
        if isinstance(entry, dict):
            candidates.append(entry.get("language"))
    return next((c for c in candidates if isinstance(c, str) and c.strip()), None)


# what an ELMoForManyLangs zip may contribute: its model files, and JSON files (config.json and
# the architecture JSON that config.json's config_path names); nothing else is extracted
ARCHIVE_FILES = ("char.dic", "word.dic", "token_embedder.pkl", "encoder.pkl")
EXTRACTED_RECORD = "extracted.json"


def fetch_archive(
    name: str,
    *,
    directory: Optional[Path] = None,
    base_url: Optional[str] = None,
    transfer: Optional[Transfer] = None,
    allow_http: bool = False,
) -> Path:
    """The model directory of the published archive ``name`` (an ISO 639 code, ``registry``),
    downloaded and unpacked unless already there.

    The zip is kept (``directory/NAME.zip``, verified like every download: resumed, and checked by
    SHA-256 on every later use) and unpacked into ``directory/model`` by the members' base names,
    only the files a model directory holds; a record of the zip's digest says the unpacking is
    complete and of this zip.
    directory (Optional[Path]): where the zip and the model go (default: ``cache_dir() / NAME``).
    RETURNS (Path): the unpacked model directory.
    """
    archive = published_archive(name)
    directory = Path(directory) if directory is not None else cache_dir() / archive.name
    directory.mkdir(parents=True, exist_ok=True)
    zip_path = ensure_file(
        archive.archive_url(base_url), directory / f"{archive.name}.zip", sha256=archive.sha256,
        check=_check_archive, transfer=transfer, allow_http=allow_http or archive.http_only,
    )
    model = directory / "model"
    digest = recorded_sha256(zip_path) or file_sha256(zip_path)
    record = model / EXTRACTED_RECORD
    if _recorded_zip(record) == digest:
        return model
    _unpack(zip_path, model)
    record.write_text(json.dumps({"zip_sha256": digest, "url": archive.url, "language": archive.name}) + "\n",
                      encoding="utf-8")
    return model


def _recorded_zip(record: Path) -> Optional[str]:
    """The zip digest a complete unpacking recorded, or None (no record, or a damaged one: unpack again)."""
    try:
        data = json.loads(record.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data.get("zip_sha256") if isinstance(data, dict) else None


def _check_archive(path: Path) -> None:
    """A downloaded zip is an ELMoForManyLangs model: it holds config.json and both weight files."""
    try:
        with zipfile.ZipFile(path) as archive:
            names = {Path(info.filename).name for info in archive.infolist() if not info.is_dir()}
    except (zipfile.BadZipFile, OSError) as error:
        raise ModelFileError(path, f"not a readable zip archive ({error})") from error
    missing = [n for n in ("config.json", "token_embedder.pkl", "encoder.pkl") if n not in names]
    if missing:
        raise ModelFileError(path, f"not an ELMoForManyLangs model: {', '.join(missing)} missing from the zip")


def _unpack(zip_path: Path, model: Path) -> None:
    """The model files of ``zip_path`` into ``model``, by base name, each written to a temporary
    name and renamed into place; a member's own path never decides where anything goes."""
    model.mkdir(parents=True, exist_ok=True)
    (model / EXTRACTED_RECORD).unlink(missing_ok=True)
    with zipfile.ZipFile(zip_path) as archive:
        for info in archive.infolist():
            base = Path(info.filename).name
            if info.is_dir() or not (base in ARCHIVE_FILES or base.endswith(".json")) or base == EXTRACTED_RECORD:
                continue
            if info.file_size > MAX_MEMBER_BYTES:
                raise ModelFileError(zip_path, f"{info.filename} claims {info.file_size} bytes, more than a model file")
            part = model / (base + ".part")
            copy_member(archive, info, part, zip_path)
            os.replace(part, model / base)
