"""Damages of zips and tarballs, rebuilt from the fixture's own members: bombs (a member of zeros
written in chunks, small on disk), sizes that lie, path-like member names (``../``, absolute),
symbolic and hard links, devices and FIFOs, duplicate, missing and encrypted members, many members.

Each returns {damage name: (apply(archive_path, rng), may_load)}.
"""
import json
import tarfile
from pathlib import Path
from typing import Callable, Dict, Tuple

from . import damage

Damages = Dict[str, Tuple[Callable, bool]]
MANY_MEMBERS = 20_000


def _escaped(root: Path) -> str:
    """An absolute folder inside the corpus root: a member extracted by its name would appear there."""
    return str(Path(root).resolve() / "_escaped")


def zip_damages(root: Path, weights: str, bomb_bytes: int) -> Damages:
    """Damages of a published model's zip whose weights member is named ``weights``."""

    def rebuild(change: Callable[[Dict[str, bytes]], list], bomb=None):
        def apply(path: Path, rng) -> None:
            damage.write_zip(path, change(damage.zip_members(path)), bomb=bomb)
        return apply

    def config_of(members: Dict[str, bytes]) -> str:
        return next(n for n in members if n.endswith(("options.json", "config.json")))

    def renamed(prefix: str):
        return rebuild(lambda m: [(prefix + name, data) for name, data in m.items()])

    def linked(members: Dict[str, bytes]) -> list:
        config = config_of(members)
        return [damage.zip_link(n, "/etc/passwd") if n == config else (n, d) for n, d in members.items()]

    def edited_config(edit: Callable[[bytes], bytes]):
        return rebuild(lambda m: [(n, edit(d) if n == config_of(m) else d) for n, d in m.items()])

    def huge_dim(data: bytes) -> bytes:
        content = json.loads(data)
        if "lstm" in content:
            content["lstm"]["dim"] = 4_000_000
        else:
            content["max_sent_len"] = 10**12
        return json.dumps(content).encode("utf-8")

    return {
        f"bomb-{weights}": (rebuild(lambda m: [(n, d) for n, d in m.items() if not n.endswith(weights)],
                                    bomb=(weights, bomb_bytes)), False),
        # a declared size over what the model may hold is refused before a byte is written; one under the
        # real bytes may be read (the copy stops at the limit, and the CRC catches a cut member)
        "declared-size-4gib": (lambda p, r: damage.zip_declared_size(p, weights, 2**32 - 1), False),
        "declared-size-10b": (lambda p, r: damage.zip_declared_size(p, weights, 10), True),
        # member names that climb out or are absolute are refused; a deep relative one is read by its base name
        "path-parent": (renamed("../"), False),
        "path-absolute": (renamed(_escaped(root) + "/"), False),
        "path-deep": (renamed("d/" * 200), True),
        "link-config": (rebuild(linked), False),
        "duplicate-config": (rebuild(lambda m: [*m.items(), (config_of(m), b"{not json")]), False),
        "missing-weights": (rebuild(lambda m: [(n, d) for n, d in m.items() if not n.endswith(weights)]), False),
        "missing-config": (rebuild(lambda m: [(n, d) for n, d in m.items() if n != config_of(m)]), False),
        "encrypted-weights": (lambda p, r: damage.zip_encrypted(p, weights), False),
        "config-huge-size": (edited_config(huge_dim), True),
        "config-bad-utf8": (edited_config(lambda d: damage.INVALID_UTF8 + d), False),
        "many-members": (rebuild(lambda m: [*m.items(), *((f"junk/{i}", b"") for i in range(MANY_MEMBERS))]), True),
        "random-bytes": (lambda p, r: p.write_bytes(r.randbytes(4096)), False),
    }


def tar_damages(root: Path, source: Path, bomb_bytes: int) -> Damages:
    """Damages of a TensorFlow model's .tar.gz (``source``: the intact fixture)."""
    members = damage.tar_members(source)
    index = next(n for n in members if n.endswith(".index"))
    data = next(n for n in sorted(members) if ".data-0" in n)
    options = next((n for n in members if n.endswith("options.json")), None)

    def rebuild(change: Callable[[dict], list], bomb=None):
        def apply(path: Path, rng) -> None:
            damage.write_tar(path, change(damage.tar_members(path)), bomb=bomb)
        return apply

    def swapped(name: str, entry):
        return rebuild(lambda m: [entry if n == name else m[n] for n in m])

    def renamed(prefix: str):
        def change(m: dict) -> list:
            out = []
            for name, (info, body) in m.items():
                info.name = prefix + name
                out.append((info, body))
            return out
        return rebuild(change)

    found: Damages = {
        "bomb-data": (rebuild(lambda m: [m[n] for n in m if n != data], bomb=(data, bomb_bytes)), False),
        "gzip-of-zeros": (lambda p, r: damage.gzip_zeros(p, bomb_bytes), False),
        "symlink-index-outside": (swapped(index, damage.tar_entry(index, tarfile.SYMTYPE, linkname="/etc/passwd")), False),
        "hardlink-index-outside": (swapped(index, damage.tar_entry(index, tarfile.LNKTYPE,
                                                                   linkname="../../../../etc/passwd")), False),
        "symlink-data-inside": (swapped(data, damage.tar_entry(data, tarfile.SYMTYPE,
                                                               linkname=Path(index).name)), False),
        "hardlink-data-inside": (swapped(data, damage.tar_entry(data, tarfile.LNKTYPE, linkname=index)), False),
        "device-data": (swapped(data, damage.tar_entry(data, tarfile.CHRTYPE)), False),
        "fifo-index": (swapped(index, damage.tar_entry(index, tarfile.FIFOTYPE)), False),
        "folder-index": (swapped(index, damage.tar_entry(index, tarfile.DIRTYPE)), False),
        "path-parent": (renamed("../"), False),
        "path-absolute": (renamed(_escaped(root) + "/"), False),
        "duplicate-index": (rebuild(lambda m: [*m.values(), damage.tar_entry(index, tarfile.REGTYPE,
                                                                             body=b"junk" * 100)]), False),
        "missing-index": (rebuild(lambda m: [m[n] for n in m if n != index]), False),
        "missing-data": (rebuild(lambda m: [m[n] for n in m if n != data]), False),
        "many-members": (rebuild(lambda m: [*m.values(), *(damage.tar_entry(f"junk/{i}", tarfile.REGTYPE, body=b"")
                                                           for i in range(MANY_MEMBERS))]), True),
        "random-bytes": (lambda p, r: p.write_bytes(r.randbytes(4096)), False),
    }
    if options is not None:
        def edited(edit: Callable[[bytes], bytes]):
            def change(m: dict) -> list:
                info, body = m[options]
                return [(info, edit(body)) if n == options else m[n] for n in m]
            return rebuild(change)

        def huge_dim(body: bytes) -> bytes:
            content = json.loads(body)
            content["lstm"]["dim"] = 4_000_000
            return json.dumps(content).encode("utf-8")

        # a TensorFlow checkpoint's sizes come from its tensors: options that contradict them are overruled
        # with a warning naming each field (docs/formats.md), so such a model loads as its tensors describe it
        found["options-lstm-dim-4e6"] = (edited(huge_dim), True)
        found["options-bad-utf8"] = (edited(lambda b: damage.INVALID_UTF8 + b), False)
    return found
