"""Published biLMs packed as a zip: the NLPL repository's ELMo archives, bilm-tf pairs zipped, and
the ELMoForManyLangs zips, read from a local file or named by language in the registry
(``fetch_archive``: downloaded once and unpacked into the cache).

An NLPL ELMo entry (http://vectors.nlpl.eu/repository/) is one zip holding ``options.json``,
``model.hdf5`` and ``vocab.txt`` (the training vocabulary, which the biLM itself does not need),
often with ``meta.json`` describing the corpus and its language. The weights are bilm-tf's HDF5,
read by ``allennlp.load_allennlp``. An ELMoForManyLangs zip (NLPL entries 136-179) holds
``config.json``, ``char.dic``, ``word.dic``, ``token_embedder.pkl``, ``encoder.pkl`` and
``meta.json`` at its top, without the architecture JSON (``efml_architecture``), read by
``efml.load_efml``. Members may sit in a folder inside the zip.

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
from typing import Dict, List, Optional, Tuple, Union

from ..bilm import BiLM
from .allennlp import OPTIONS_NAME, WEIGHTS_NAMES, find_pair, load_allennlp, pair_candidates
from ..files import cache_dir, file_sha256
from .download import Transfer, ensure_file
from .download_record import recorded_sha256
from .efml import CONFIG_NAME, ENCODER_NAME, TOKEN_EMBEDDER_NAME, load_efml
from .errors import ModelFileError
from .registry import published_archive

PathLike = Union[str, Path]
META = "meta.json"
ALLENNLP = "allennlp"
EFML = "elmoformanylangs"
# what an ELMoForManyLangs zip contributes: its model files, and JSON files (config.json, meta.json
# and an architecture JSON where the zip has one); nothing else is extracted
EFML_FILES = ("char.dic", "word.dic", TOKEN_EMBEDDER_NAME, ENCODER_NAME)
EFML_REQUIRED = (CONFIG_NAME, TOKEN_EMBEDDER_NAME, ENCODER_NAME)
EXTRACTED_RECORD = "extracted.json"
# biLM weights are at most a few GB; a member claiming more is not one (or a zip bomb)
MAX_MEMBER_BYTES = 8 * 2**30
MAX_META_BYTES = 1 << 20


@dataclass(frozen=True)
class ArchiveContents:
    """What a published biLM zip holds.

    family (str): "allennlp" (options.json + HDF5 weights) or "elmoformanylangs".
    members (Dict[str, str]): the members a model is read from, by base name -> name in the zip.
    language (Optional[str]): the language its ``meta.json`` records (an ISO 639 code), or None.
    pair (Optional[Tuple[str, str]]): a zipped pair's options and weights, by base name.
    """

    family: str
    members: Dict[str, str]
    language: Optional[str]
    pair: Optional[Tuple[str, str]] = None

    @property
    def options(self) -> Optional[str]:
        """RETURNS (Optional[str]): the options member of a zipped pair."""
        return self.members[self.pair[0]] if self.pair else None

    @property
    def weights(self) -> Optional[str]:
        """RETURNS (Optional[str]): the HDF5 weights member of a zipped pair."""
        return self.members[self.pair[1]] if self.pair else None


def archive_contents(path: PathLike) -> ArchiveContents:
    """The members of a published biLM zip. Raises ModelFileError saying what is wrong: not a
    readable zip, no model's files in it, or two members of one base name."""
    try:
        with zipfile.ZipFile(path) as archive:
            infos = [info for info in archive.infolist() if not info.is_dir()]
            meta_infos = [info for info in infos if Path(info.filename).name == META]
            meta = _read_meta(archive, meta_infos[0] if len(meta_infos) == 1 else None)
    except (zipfile.BadZipFile, OSError) as error:
        raise ModelFileError(path, f"not a readable zip archive ({error})") from error
    names = {Path(info.filename).name for info in infos}
    pair = find_pair(names, path) if all(pair_candidates(names)) else None
    if pair is not None:  # by base name, as a folder holding the same files is read (``loading``)
        family, wanted = ALLENNLP, list(pair)
    elif all(name in names for name in EFML_REQUIRED):
        family, wanted = EFML, sorted(n for n in names if n in EFML_FILES or (n.endswith(".json") and n != EXTRACTED_RECORD))
    else:
        found = ", ".join(sorted(names)) or "nothing"
        raise ModelFileError(
            path, f"a biLM archive holds {OPTIONS_NAME} and {' or '.join(WEIGHTS_NAMES)} (a published pair, as NLPL's ELMo "
                  f"archives), or {', '.join(EFML_REQUIRED)} (an ELMoForManyLangs model); this one holds {found}"
        )
    members: Dict[str, str] = {}
    for name in wanted:
        found_as: List[str] = [info.filename for info in infos if Path(info.filename).name == name]
        if len(found_as) > 1:
            raise ModelFileError(path, f"holds {len(found_as)} members named {name} ({', '.join(found_as)}): "
                                       "which one is the model's is not clear; unpack the one you mean")
        members[name] = found_as[0]
    return ArchiveContents(family, members, _language(meta), pair)


def load_archive(path: PathLike) -> BiLM:
    """Load the biLM in a published zip (see the module docstring).

    RETURNS (BiLM): the model, on CPU in eval mode, with the plain computation.
    """
    contents = archive_contents(path)
    with tempfile.TemporaryDirectory(prefix="spacy-elmo-archive-") as work:
        extract_members(path, contents, Path(work))
        if contents.pair is not None:
            return load_allennlp(Path(work) / contents.pair[0], Path(work) / contents.pair[1])
        try:
            return load_efml(Path(work), label=path)
        except ModelFileError as error:  # name the zip and its member, not the private folder
            member = Path(error.path).name if Path(error.path) != Path(work) else "the model"
            raise ModelFileError(path, f"{member}: {error.problem.replace(work, str(path))}") from error


def extract_members(path: PathLike, contents: ArchiveContents, target: Path) -> None:
    """The members a model is read from (``contents.members``) into ``target``, by base name,
    each written to a temporary name and renamed into place; a member's own path never decides
    where anything goes."""
    target.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path) as archive:
        for base, member in contents.members.items():
            info = archive.getinfo(member)
            if info.file_size > MAX_MEMBER_BYTES:
                raise ModelFileError(path, f"{member} claims {info.file_size} bytes, more than a model file")
            part = target / (base + ".part")
            copy_member(archive, info, part, path)
            os.replace(part, target / base)


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


def folder_language(directory: PathLike) -> Optional[str]:
    """The language the ``meta.json`` of an unpacked archive's folder records, or None (no
    meta.json, or one that names none or cannot be read)."""
    path = Path(directory) / META
    if not path.is_file() or path.stat().st_size > MAX_META_BYTES:
        return None
    return _language(_parse_meta(path.read_bytes()))


def _read_meta(archive: zipfile.ZipFile, info: Optional[zipfile.ZipInfo]) -> Optional[dict]:
    if info is None or info.file_size > MAX_META_BYTES:
        return None
    return _parse_meta(archive.read(info))


def _parse_meta(data: bytes) -> Optional[dict]:
    try:
        meta = json.loads(data.decode("utf-8"))
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
    record.unlink(missing_ok=True)
    extract_members(zip_path, archive_contents(zip_path), model)
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
    if archive_contents(path).family != EFML:
        raise ModelFileError(path, f"not an ELMoForManyLangs model: {', '.join(EFML_REQUIRED)} missing from the zip")
