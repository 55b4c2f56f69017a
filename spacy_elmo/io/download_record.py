"""The record of a download: ``NAME.sha256.json`` beside a downloaded file, holding its URL, size
and SHA-256, compared with the file on every later use.

What each state of the record means (docs/download.md, "What is checked"):

- the record matches the file (and the registry's SHA-256, where known): the file is used;
- the file changed since the record was written: it is removed and downloaded again, with a line;
- no record: the file is taken as one placed by hand. It must pass the registry's SHA-256 where
  known and the model check, and is then recorded, with a line saying so: a downloaded file whose
  record was deleted is checked the same way, never trusted without a word;
- a record that cannot be read (damaged, or not ours): refused, naming it and what to do; the
  file is neither trusted nor removed.

The record detects damage and changes made by mistake; whoever can write the cache can also
rewrite the record, so it is no defence against a deliberate change (the registry's SHA-256 is,
where the registry has one).
"""
import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Callable, Optional

from ..files import file_sha256
from .errors import ModelFileError

SIDECAR_SUFFIX = ".sha256.json"
PART_SUFFIX = ".part"
CHUNK_BYTES = 1 << 20

Check = Callable[[Path], object]



def record_path(target: Path) -> Path:
    """RETURNS (Path): the JSON file beside ``target`` that records its URL, size and SHA-256."""
    return Path(target).with_name(Path(target).name + SIDECAR_SUFFIX)


def recorded_sha256(target: Path) -> Optional[str]:
    """The SHA-256 recorded at download, or None where there is no record. A record that exists
    but cannot be read is a ModelFileError naming it: it never counts as no record."""
    path = record_path(target)
    if not path.exists():
        return None
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise _damaged(path, target, f"unreadable ({error})") from error
    digest = record.get("sha256") if isinstance(record, dict) else None
    if not isinstance(digest, str) or len(digest) != 64:
        raise _damaged(path, target, "holds no SHA-256")
    return digest


def write_record(target: Path, url: str, digest: str) -> None:
    """Record ``target``'s URL, size and SHA-256 beside it (written whole, then renamed into place)."""
    record = {"url": url, "bytes": target.stat().st_size, "sha256": digest}
    path = record_path(target)
    temporary = path.with_name(path.name + PART_SUFFIX)
    temporary.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    os.replace(temporary, path)


def intact(target: Path, url: str, sha256: Optional[str], check: Optional[Check]) -> bool:
    """Whether ``target`` is usable as it is (see the module docstring). A file we downloaded that
    no longer matches its record is removed (to be fetched again); a file placed by hand that
    fails is refused, and so is a damaged record.

    sha256 (Optional[str]): the published file's SHA-256, where the registry knows it.
    check (Optional[Callable[[Path], object]]): reads the file, raising ModelFileError if unusable.
    RETURNS (bool): True to use the file, False to download it again.
    """
    recorded = recorded_sha256(target)
    digest = file_sha256(target)
    if recorded is not None:
        if digest == recorded and sha256 in (None, digest):
            return True
        note(f"{target}: changed since it was downloaded (SHA-256 {digest}, recorded {recorded}); "
             "downloading it again")
        target.unlink()
        record_path(target).unlink()
        return False
    if sha256 is not None and digest != sha256:
        raise ModelFileError(target, f"SHA-256 {digest} is not the published file's {sha256}; delete it "
                                     "to download it again")
    if check is not None:
        check(target)
    write_record(target, url, digest)
    compared = "the published SHA-256 and " if sha256 is not None else ""
    note(f"{target}: no record of its download ({record_path(target).name}): checked as a file placed by hand "
         f"({compared}the model check) and recorded with SHA-256 {digest}; if it was downloaded here and its "
         "record deleted, its bytes were not compared with what was downloaded: delete it to download it again")
    return True


def note(message: str) -> None:
    """A line for the user on stderr (progress and what was decided about a file)."""
    print(message, file=sys.stderr)


def _damaged(path: Path, target: Path, what: str) -> ModelFileError:
    return ModelFileError(
        path, f"the record of {target.name}'s download is {what}, so the file cannot be verified; delete "
              f"{target.name} and this record to download it again, or this record alone to have {target.name} "
              "checked as a file placed by hand (and recorded anew)"
    )
