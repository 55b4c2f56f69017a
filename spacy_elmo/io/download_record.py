"""The record of a download: ``NAME.sha256.json`` beside a downloaded file, holding its URL, size
and SHA-256, compared with the file on every later use.

What each state of the record means (docs/download.md, "What is checked"):

- the record matches the file (and the registry's SHA-256, where known): the file is used;
- the file changed since the record was written: it is removed and downloaded again, with a line;
- no record: the file is taken as one placed by hand. It must have the shape and size the
  registry gives its name (``published_shape``: options and HDF5 metadata, before anything is
  built), the registry's SHA-256 where known, and pass the model check; only then is it recorded,
  the record saying what it was checked against ("by shape only" where the registry has no
  SHA-256), with a line saying so. A downloaded file whose record was deleted is checked the same
  way, never trusted without a word;
- a record that cannot be read (damaged, or not ours): refused, naming it and what to do; the
  file is neither trusted nor removed.

The record detects damage and changes made by mistake; whoever can write the cache can also
rewrite the record, so it is no defence against a deliberate change (the registry's SHA-256 is,
where the registry has one).
"""
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


def write_record(target: Path, url: str, digest: str, *, checked: Optional[str] = None) -> None:
    """Record ``target``'s URL, size and SHA-256 beside it (written whole, then renamed into place).

    checked (Optional[str]): for a file placed by hand, what it was checked against before it was trusted.
    """
    record = {"url": url, "bytes": target.stat().st_size, "sha256": digest}
    if checked is not None:
        record["checked"] = checked
    path = record_path(target)
    temporary = path.with_name(path.name + PART_SUFFIX)
    temporary.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    os.replace(temporary, path)


def intact(target: Path, url: str, sha256: Optional[str], check: Optional[Check], placed: Optional[Check] = None) -> bool:
    """Whether ``target`` is usable as it is (see the module docstring). A file we downloaded that
    no longer matches its record is removed (to be fetched again); a file placed by hand that
    fails is refused, and so is a damaged record.

    sha256 (Optional[str]): the published file's SHA-256, where the registry knows it.
    check (Optional[Callable[[Path], object]]): reads the file, raising ModelFileError if unusable.
    placed (Optional[Callable[[Path], str]]): compares a file placed by hand with what the registry
        knows of its name (``published_shape``) before anything else reads it, raising
        ModelFileError where it differs; returns what it compared.
    RETURNS (bool): True to use the file, False to download it again.
    """
    recorded = recorded_sha256(target)
    if recorded is None:
        _check_placed(target, url, sha256, check, placed)
        return True
    digest = file_sha256(target)
    if digest == recorded and sha256 in (None, digest):
        return True
    note(f"{target}: changed since it was downloaded (SHA-256 {digest}, recorded {recorded}); "
         "downloading it again")
    target.unlink()
    record_path(target).unlink()
    return False


def _check_placed(target: Path, url: str, sha256: Optional[str], check: Optional[Check], placed: Optional[Check]) -> None:
    """Check a file with no record as one placed by hand, then record it: what the registry knows
    of its name first (shape, size: metadata only), then its SHA-256, then the model check."""
    compared = [str(placed(target))] if placed is not None else []
    digest = file_sha256(target)
    if sha256 is not None and digest != sha256:
        raise ModelFileError(target, f"SHA-256 {digest} is not the published file's {sha256}; delete it "
                                     "to download it again")
    if check is not None:
        check(target)
    compared += ["the published SHA-256"] * (sha256 is not None) + ["the model check"] * (check is not None)
    checked = f"placed by hand, checked against {', '.join(compared) or 'nothing'}"
    if sha256 is None:
        checked += ("; by shape only: the registry has no SHA-256 for it" if placed is not None
                    else "; the registry knows neither its shape nor its SHA-256")
    write_record(target, url, digest, checked=checked)
    note(f"{target}: no record of its download ({record_path(target).name}): {checked}; recorded with SHA-256 "
         f"{digest}. If it was downloaded here and its record deleted, its bytes were not compared with what was "
         "downloaded: delete it to download it again")


def note(message: str) -> None:
    """A line for the user on stderr (progress and what was decided about a file)."""
    print(message, file=sys.stderr)


def _damaged(path: Path, target: Path, what: str) -> ModelFileError:
    return ModelFileError(
        path, f"the record of {target.name}'s download is {what}, so the file cannot be verified; delete "
              f"{target.name} and this record to download it again, or this record alone to have {target.name} "
              "checked as a file placed by hand (and recorded anew)"
    )
