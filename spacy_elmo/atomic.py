"""Files written whole or not at all, for every layer that writes one (model directories,
checkpoints, vocabularies, probe reports)."""
import os
from pathlib import Path


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
