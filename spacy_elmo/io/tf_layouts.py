"""Where the files of each published TensorFlow biLM layout are: a folder, zip or tar archive
(``ModelFiles``), the checkpoint in it (``checkpoint_prefix``: the one a ``checkpoint`` state file
names, by base name, else the only, shallowest ``.index``), the options and vocabulary beside or
above it (``find_beside``), and the published .tar.gz archives by name (``fetch_tf_model``).

Archives are read in place, member by member: nothing is unpacked, a member's path never decides
where anything is written; members named like paths, links and devices are refused, and members
held to their declared sizes (``archive``).
"""
import os
import re
import tarfile
import zipfile
from pathlib import Path, PurePosixPath
from typing import BinaryIO, Dict, List, Optional, Tuple, Union

from ..files import cache_dir
from .allennlp import pair_candidates
from .archive import ARCHIVE_ERRORS, MAX_TEXT_BYTES, check_declared, member_limit, tar_members, zip_members
from .download import Transfer, ensure_file
from .errors import ModelFileError
from .registry import PUBLISHED_TF_MODELS, published_names

PathLike = Union[str, Path]
CHECKPOINT_NAME = "checkpoint"
INDEX_SUFFIX = ".index"
MAX_DEPTH = 4


class ModelFiles:
    """The regular files of a folder, a zip or a tar archive, by relative POSIX name."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._zip: Optional[zipfile.ZipFile] = None
        self._tar: Optional[tarfile.TarFile] = None
        self.sizes: Dict[str, int] = {}
        self._members: Dict[str, object] = {}
        try:
            if path.is_dir():
                for root, dirs, files in os.walk(path):
                    depth = len(Path(root).relative_to(path).parts)
                    dirs[:] = [] if depth >= MAX_DEPTH else sorted(dirs)
                    for name in files:
                        full = Path(root) / name
                        if full.is_file() and not full.is_symlink():
                            self.sizes[full.relative_to(path).as_posix()] = full.stat().st_size
            elif zipfile.is_zipfile(path):
                self._zip = zipfile.ZipFile(path)
                for info in zip_members(self._zip, path):
                    check_declared(path, info.filename, info.file_size, member_limit(), compressed=info.compress_size)
                    self._add(info.filename, info.file_size, info)
            elif tarfile.is_tarfile(path):
                self._tar = tarfile.open(path, "r:*")
                for member in tar_members(self._tar, path):  # links, devices and bombs are refused
                    self._add(member.name, member.size, member)
            else:
                raise ModelFileError(path, "neither a folder, a zip nor a tar archive")
        except ARCHIVE_ERRORS as err:
            self.close()
            raise ModelFileError(path, f"not a readable archive, perhaps truncated ({err})") from err
        except ModelFileError:
            self.close()
            raise

    def _add(self, name: str, size: int, member: object) -> None:
        name = PurePosixPath(name.lstrip("/")).as_posix()
        if name.startswith("./"):
            name = name[2:]
        self.sizes[name] = size
        self._members[name] = member

    def open(self, name: str) -> BinaryIO:
        if name not in self.sizes:
            raise ModelFileError(f"{self.path}/{name}", "not found; a checkpoint needs its .index and every .data-* shard")
        if self._zip is not None:
            try:
                return self._zip.open(self._members[name])  # type: ignore[arg-type]
            except ARCHIVE_ERRORS as err:
                raise ModelFileError(self.path, f"{name} could not be read, perhaps truncated ({err})") from err
        if self._tar is not None:
            handle = self._tar.extractfile(self._members[name])  # type: ignore[arg-type]
            assert handle is not None  # regular files only
            return handle
        return open(self.path / name, "rb")

    def read(self, name: str, *, limit: int = MAX_TEXT_BYTES) -> bytes:
        """The whole of a small file (an index, options, a vocabulary): more than ``limit`` bytes,
        declared or read, is refused."""
        check_declared(self.path, name, self.sizes.get(name, 0), limit)
        try:
            with self.open(name) as handle:
                data = handle.read(limit + 1)
        except ARCHIVE_ERRORS as err:
            raise ModelFileError(self.path, f"{name} could not be read, perhaps truncated ({err})") from err
        check_declared(self.path, name, len(data), limit)
        return data

    def close(self) -> None:
        for archive in (self._zip, self._tar):
            if archive is not None:
                archive.close()


def is_tf_model(path: PathLike) -> bool:
    """Whether ``path`` (a folder, zip or tar archive) holds a TensorFlow checkpoint of a biLM."""
    return any(n.endswith(INDEX_SUFFIX) for n in _tf_files(path))


def needs_tf_reader(path: PathLike) -> bool:
    """Whether ``path`` holds a TensorFlow checkpoint and no published pair that the HDF5 readers
    take (``allennlp.pair_candidates``: options.json + model.hdf5 or weights.hdf5, or AllenNLP's
    file names) at a folder's top, or anywhere in a zip (as ``archive`` finds them). Where there are both (an NLPL "full" zip, a folder after
    ``dump_weights``), the pair gives the biLM and the checkpoint the softmax (``read_tf_head``); a
    .tar.gz is always read here."""
    names = _tf_files(path)
    if not any(n.endswith(INDEX_SUFFIX) for n in names):
        return False
    if Path(path).is_dir():
        pair_names = {n for n in names if "/" not in n}
    elif zipfile.is_zipfile(path):
        pair_names = {PurePosixPath(n).name for n in names}
    else:
        return True
    options, weights = pair_candidates(pair_names)
    return not (options and weights)


def checkpoint_files(path: PathLike) -> Tuple[Path, ...]:
    """The files a TensorFlow biLM's tensors are read from, for records and checksums: in a folder,
    the checkpoint's data shards and its index; an archive is one file.

    RETURNS (Tuple[Path, ...]): the files, the first data shard first.
    """
    path = Path(path)
    if not path.is_dir():
        return (path,)
    files = ModelFiles(path)
    try:
        prefix = checkpoint_prefix(files)
    finally:
        files.close()
    shards = sorted(n for n in files.sizes if n.startswith(prefix + ".data-"))
    return tuple(path / name for name in (*shards, prefix + INDEX_SUFFIX))


def _tf_files(path: PathLike) -> List[str]:
    """The files in a folder or archive (none where it is neither, or unreadable)."""
    try:
        files = ModelFiles(Path(path))
    except ModelFileError:
        if Path(path).is_file() and tarfile.is_tarfile(path):
            raise  # a tar is read here only: what is wrong with it is the message
        return []
    files.close()
    return list(files.sizes)


def checkpoint_prefix(files: ModelFiles) -> str:
    indexes = sorted(n[: -len(INDEX_SUFFIX)] for n in files.sizes if n.endswith(INDEX_SUFFIX))
    if not indexes:
        raise ModelFileError(files.path, "no TensorFlow checkpoint (.index file) in it")
    named = []
    for state in sorted((n for n in files.sizes if PurePosixPath(n).name == CHECKPOINT_NAME), key=_depth):
        folder = PurePosixPath(state).parent
        match = re.search(r'^model_checkpoint_path:\s*"(.*)"', files.read(state).decode("utf-8", "replace"), re.M)
        if match:
            # the path may be absolute on the machine that trained it: its base name is the file here
            base = re.split(r"[\\/]", match.group(1))[-1]
            prefix = (folder / base).as_posix() if str(folder) != "." else base
            if prefix not in indexes:
                raise ModelFileError(files.path, f"{state} names checkpoint {base}, but no {base}{INDEX_SUFFIX} is beside it")
            named.append(prefix)
    if named:
        return named[0]
    shallowest = min(_depth(n) for n in indexes)
    top = [n for n in indexes if _depth(n) == shallowest]
    if len(top) > 1:
        raise ModelFileError(files.path, f"several checkpoints ({', '.join(top)}) and no '{CHECKPOINT_NAME}' file saying which")
    return top[0]


def _depth(name: str) -> int:
    return len(PurePosixPath(name).parts)


def find_beside(files: ModelFiles, folder: PurePosixPath, name: str) -> Optional[str]:
    """``name`` in the checkpoint's folder or the nearest folder above it."""
    for parent in (folder, *folder.parents):
        candidate = (parent / name).as_posix() if str(parent) != "." else name
        if candidate in files.sizes:
            return candidate
    return None


def fetch_tf_model(
    name: str,
    *,
    directory: Optional[Path] = None,
    base_url: Optional[str] = None,
    transfer: Optional[Transfer] = None,
    allow_http: bool = False,
) -> Path:
    """The archive of the published TensorFlow biLM ``name`` (``registry.PUBLISHED_TF_MODELS``),
    downloaded unless already there (resumed, verified, SHA-256 recorded and checked on every
    later use), and read in place.

    directory (Optional[Path]): where it goes (default: ``cache_dir() / NAME``).
    RETURNS (Path): the .tar.gz.
    """
    if name not in PUBLISHED_TF_MODELS:
        raise ModelFileError(name, f"not found: neither an existing path nor a published model name ({published_names()})")
    model = PUBLISHED_TF_MODELS[name]
    directory = Path(directory) if directory is not None else cache_dir() / model.name
    directory.mkdir(parents=True, exist_ok=True)
    return ensure_file(
        model.archive_url(base_url), directory / model.file_name, sha256=model.sha256,
        check=_check_tf_archive, transfer=transfer, allow_http=allow_http or model.http_only,
    )


def _check_tf_archive(path: Path) -> None:
    if not is_tf_model(path):
        raise ModelFileError(path, "not a TensorFlow biLM archive: no checkpoint (.index) in it")
