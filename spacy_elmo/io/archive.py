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
nothing in the archive is executed or unpickled. What an archive declares is checked before
anything is written (``zip_members``, ``tar_members``, which the TensorFlow and contributed
readers use too): a member named like a path (absolute, or climbing with ".."), a link or a device
is refused; a member larger than a model file (``member_limit``: twice the cap on a model's size),
or one that inflates more than ``BOMB_RATIO`` times (weights do not compress so), is refused by its
declared sizes, and a pair's weights may be no larger than its options imply
(``pair_weights_limit``). Members are then copied by streaming, held to those limits whatever
their headers say (``copy_limited``). Errors name the archive and the member, never the private
folder.
"""
import json
import os
import stat
import tarfile
import tempfile
import zipfile
import zlib
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Dict, Iterator, List, Optional, Tuple, Union

from ..bilm import BiLM
from .allennlp import OPTIONS_NAME, WEIGHTS_NAMES, find_pair, load_allennlp, pair_candidates, read_options, tensor_shapes
from ..files import cache_dir, file_sha256
from .download import Transfer, ensure_file
from .download_record import recorded_sha256
from .efml import CONFIG_NAME, ENCODER_NAME, TOKEN_EMBEDDER_NAME, load_efml
from .errors import ModelFileError
from .limits import FILE_OVERHEAD, check_config_size, max_file_bytes, tensor_bytes
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
MAX_META_BYTES = 1 << 20
# options, configs, dictionaries and vocabularies: a bilm-tf vocab.txt of 793k words is 7 MB
MAX_TEXT_BYTES = 64 << 20
# float32 weights compress about 1.1 times; a large member that inflates 100 times is no model's
BOMB_RATIO = 100
BOMB_MIN_BYTES = 16 << 20
CHUNK = 1 << 20
# the files a model is copied out of a zip from: an EFML model's four and a few JSON files
MAX_MODEL_MEMBERS = 64
# what reading a damaged zip or tar raises (zlib's error from a corrupt deflate stream included)
ARCHIVE_ERRORS = (zipfile.BadZipFile, tarfile.TarError, zlib.error, OSError, EOFError)


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
            infos = zip_members(archive, path)
            meta_infos = [info for info in infos if Path(info.filename).name == META]
            meta = _read_meta(archive, meta_infos[0] if len(meta_infos) == 1 else None)
    except ARCHIVE_ERRORS as error:
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
    if len(wanted) > MAX_MODEL_MEMBERS:
        raise ModelFileError(path, f"holds {len(wanted)} files a model would be read from ({', '.join(wanted[:3])}, ...); "
                                   f"a model has at most {MAX_MODEL_MEMBERS}")
    by_base: Dict[str, List[str]] = {}
    for info in infos:
        by_base.setdefault(Path(info.filename).name, []).append(info.filename)
    members: Dict[str, str] = {}
    for name in wanted:
        found_as = by_base[name]
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
        try:
            extract_members(path, contents, Path(work))
            if contents.pair is not None:
                return load_allennlp(Path(work) / contents.pair[0], Path(work) / contents.pair[1])
            return load_efml(Path(work), label=path)
        except ModelFileError as error:  # name the zip and its member, not the private folder
            raise _named_by_archive(error, Path(work), path, contents) from error


def _named_by_archive(error: ModelFileError, work: Path, path: PathLike, contents: ArchiveContents) -> ModelFileError:
    if not error.path.startswith(str(work)):
        return error
    problem = error.problem
    for base, member in contents.members.items():
        problem = problem.replace(str(work / base), f"{path}:{member}")
    problem = problem.replace(str(work), str(path))
    base = Path(error.path).name
    member = contents.members.get(base, "the model") if Path(error.path) != work else "the model"
    return ModelFileError(path, f"{member}: {problem}")


def extract_members(path: PathLike, contents: ArchiveContents, target: Path) -> None:
    """The members a model is read from (``contents.members``) into ``target``, by base name,
    each written to a temporary name and renamed into place; a member's own path never decides
    where anything goes. A pair's options come first: its weights may be no larger than they imply."""
    target.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path) as archive:
        infos = {info.filename: info for info in zip_members(archive, path)}
        order = sorted(contents.members.items(), key=lambda item: contents.pair is not None and item[0] != contents.pair[0])
        for base, member in order:
            limit = member_limit() if base.endswith((".pkl", ".hdf5")) else MAX_TEXT_BYTES
            if contents.pair is not None and base == contents.pair[1]:
                limit = pair_weights_limit(target / contents.pair[0], path)
            info = infos[member]
            check_declared(path, member, info.file_size, limit, compressed=info.compress_size)
            part = target / (base + ".part")
            with _zip_errors(path, member, part):
                with archive.open(info) as source:
                    copy_limited(source, part, limit, archive=path, member=member)
            os.replace(part, target / base)


def copy_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo, target: Path, path: PathLike) -> None:
    """Stream one member of the zip at ``path`` into ``target``, held to ``member_limit``; a damaged
    member (a CRC mismatch included) is a ModelFileError naming the zip, and leaves no partial ``target``."""
    check_declared(path, info.filename, info.file_size, member_limit(), compressed=info.compress_size)
    with _zip_errors(path, info.filename, target):
        with archive.open(info) as source:
            copy_limited(source, target, member_limit(), archive=path, member=info.filename)


@contextmanager
def _zip_errors(path: PathLike, member: str, part: Path) -> Iterator[None]:
    """A damaged member read from the zip at ``path`` is a ModelFileError naming it; ``part`` goes."""
    try:
        yield
    except ARCHIVE_ERRORS as error:
        part.unlink(missing_ok=True)
        raise ModelFileError(path, f"{member} could not be read from the archive ({error})") from error


def member_limit() -> int:
    """RETURNS (int): the most bytes one model file in an archive may hold (``limits.max_file_bytes``)."""
    return max_file_bytes()


def pair_weights_limit(options: Path, archive: PathLike) -> int:
    """The most bytes a pair's HDF5 weights may hold, given its options (already copied out):
    its datasets in float64 at most, and headers. The options' model is held to the cap first."""
    config = read_options(options)
    check_config_size(config, f"{archive}:{options.name}")
    return 2 * tensor_bytes(tensor_shapes(config).values()) + FILE_OVERHEAD


def check_declared(path: PathLike, member: str, size: int, limit: int, *, compressed: Optional[int] = None) -> None:
    """Refuse a member by the sizes the archive declares, before a byte of it is written.

    size (int): what it inflates to; limit (int): the most it may; compressed (Optional[int]): its
        stored size in a zip, or a whole tar's (whose members have none of their own).
    """
    if size > limit:
        raise ModelFileError(path, f"{member} declares {size} bytes, more than the {limit} such a file may hold "
                                   "(a model file's size follows from its options and the cap on a model's size)")
    if compressed is not None and size > BOMB_MIN_BYTES and size > BOMB_RATIO * max(compressed, 1):
        raise ModelFileError(path, f"{member} inflates {size // max(compressed, 1)} times ({compressed} bytes to "
                                   f"{size}): a zip bomb, not model weights, which hardly compress")


def copy_limited(source: IO[bytes], target: Path, limit: int, *, archive: PathLike, member: str) -> None:
    """Copy ``source`` into ``target`` by chunks, refusing it (and removing ``target``) once it
    yields more than ``limit`` bytes, whatever the archive declared."""
    written = 0
    try:
        with open(target, "wb") as sink:
            while chunk := source.read(CHUNK):
                written += len(chunk)
                if written > limit:
                    raise ModelFileError(archive, f"{member} holds more than the {limit} bytes such a file may; "
                                                  "its declared size is wrong: a damaged or hostile archive")
                sink.write(chunk)
    except BaseException:
        target.unlink(missing_ok=True)
        raise


def member_name_problem(name: str) -> Optional[str]:
    """RETURNS (Optional[str]): why a member's name is refused (absolute, a drive, ".." climbing out),
    or None. No name decides where anything is written; such names only come from hostile archives."""
    parts = name.replace("\\", "/").split("/")
    if name.startswith(("/", "\\")) or (len(name) > 1 and name[1] == ":"):
        return "is named by an absolute path"
    if ".." in parts:
        return "is named by a path that climbs out of the archive (..)"
    return None


def zip_members(archive: zipfile.ZipFile, path: PathLike) -> List[zipfile.ZipInfo]:
    """The files of a zip, refusing members named like paths, symbolic links (by the Unix mode the
    zip records) and encrypted members. RETURNS (List[ZipInfo]): its files (folders left out)."""
    files = []
    for info in archive.infolist():
        problem = member_name_problem(info.filename)
        if problem is None and stat.S_ISLNK(info.external_attr >> 16):
            problem = "is a symbolic link"
        if problem is None and info.flag_bits & 0x1:
            problem = "is encrypted"
        if problem is not None:
            raise ModelFileError(path, f"member {info.filename!r} {problem}; a model archive holds files only")
        if not info.is_dir():
            files.append(info)
    return files


def tar_members(archive: tarfile.TarFile, path: PathLike) -> List[tarfile.TarInfo]:
    """The regular files of a tar, refusing members named like paths, links and devices, and
    members larger than a model file or inflating more than ``BOMB_RATIO`` times the whole archive
    (``check_declared``), each as its header is read: before a compressed stream is decompressed
    past its data.

    RETURNS (List[TarInfo]): its files (folders left out)."""
    files = []
    stored = os.path.getsize(path)
    while (member := archive.next()) is not None:
        problem = member_name_problem(member.name)
        if problem is None and not (member.isreg() or member.isdir()):
            problem = "is a link" if member.issym() or member.islnk() else "is a device or other special file"
        if problem is not None:
            raise ModelFileError(path, f"member {member.name!r} {problem}; a model archive holds files only")
        if member.isreg():
            check_declared(path, member.name, member.size, member_limit(), compressed=stored)
            files.append(member)
    return files


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
    except (ValueError, UnicodeDecodeError, RecursionError):
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
