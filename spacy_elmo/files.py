"""Files, for every layer that reads or writes one: written whole or not at all (model
directories, checkpoints, vocabularies, reports), their SHA-256, and the one folder spacy-elmo
caches in (downloaded models in ``io/download.py``, built kernels in ``fast/``)."""
import hashlib
import os
from pathlib import Path
from typing import Union

CACHE_ENV = "SPACY_ELMO_CACHE"
HASH_CHUNK = 1 << 20


def write_atomic(path: Path, data: bytes) -> None:
    """Write bytes so that a crash leaves either the old file or the new one, never a mix."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except OSError as err:
        # "No space left on device" alone does not say which write failed
        raise OSError(err.errno, err.strerror, str(path)) from err
    finally:
        if tmp.exists():
            tmp.unlink()
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def file_sha256(path: Union[str, Path]) -> str:
    """RETURNS (str): the hex SHA-256 of the file at ``path``, read a chunk at a time."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as handle:
        for chunk in iter(lambda: handle.read(HASH_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def cache_dir() -> Path:
    """``$SPACY_ELMO_CACHE``, else ``$XDG_CACHE_HOME/spacy_elmo``, else ``~/.cache/spacy_elmo``.

    RETURNS (Path): the directory (not created here).
    """
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base).expanduser() / "spacy_elmo"
