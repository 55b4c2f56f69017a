"""The ways a model file is damaged, each deterministic (a seeded ``random.Random``) and each small on
disk: bytes cut, flipped or replaced, JSON made invalid or its sizes made huge, HDF5 datasets
dropped, swapped, retyped or declared huge, safetensors headers that lie, and zips and tarballs
rebuilt with bombs (written in chunks), path-like member names, links and devices.

Each function changes files in place; ``layouts`` decides which file of which layout gets what.
"""
import gzip
import io
import json
import os
import random
import shutil
import struct
import tarfile
import zipfile
from pathlib import Path
from typing import Callable, Dict, Iterable, Optional, Tuple

import h5py
import numpy as np

MIB = 1 << 20
INVALID_UTF8 = b"\xff\xfe\xc3\x28\xa0\xa1\xe2\x28\xa1\xf0\x28\x8c\xbc"


# -- bytes ------------------------------------------------------------------------------------------
def truncate(path: Path, fraction: float) -> None:
    """Keep the first ``fraction`` of the file's bytes (0: empty; 1 byte short at fractions near 1)."""
    data = path.read_bytes()
    keep = len(data) - 1 if fraction >= 1 else int(len(data) * fraction)
    path.write_bytes(data[:keep])


def flip_bytes(path: Path, rng: random.Random, count: int = 3) -> None:
    """Invert ``count`` bytes at seeded positions."""
    data = bytearray(path.read_bytes())
    for position in rng.sample(range(len(data)), min(count, len(data))):
        data[position] ^= 0xFF
    path.write_bytes(bytes(data))


def replace_with_directory(path: Path) -> None:
    """A directory (holding one file) where the file was."""
    path.unlink()
    path.mkdir()
    (path / "inside").write_bytes(b"not the file")


def sparse_huge(path: Path, size: int = 8 << 30) -> None:
    """The file's bytes, then a hole up to ``size``: huge by its length, a few KB on disk."""
    with open(path, "r+b") as out:
        out.truncate(size)


# -- text and JSON ----------------------------------------------------------------------------------
def invalid_utf8(path: Path, rng: random.Random) -> None:
    """Bytes that are no UTF-8 spliced into the middle of a text file."""
    data = path.read_bytes()
    at = rng.randrange(max(1, len(data)))
    path.write_bytes(data[:at] + INVALID_UTF8 + data[at:])


def deep_json(path: Path, depth: int = 100_000) -> None:
    """Valid JSON nested deeper than a recursive parser's stack."""
    path.write_text("[" * depth + "]" * depth, encoding="utf-8")


def edit_json(path: Path, edit: Callable[[dict], object]) -> None:
    """Rewrite a JSON file with ``edit(content)``'s return value (or the content it changed in place)."""
    content = json.loads(path.read_text(encoding="utf-8"))
    changed = edit(content)
    path.write_text(json.dumps(content if changed is None else changed), encoding="utf-8")


def setter(*path: object) -> Callable[[dict], None]:
    """An ``edit_json`` edit that sets ``content[k1][k2]... = value`` for ``path`` = (k1, k2, ..., value)
    (a missing key on the way is made)."""
    keys, value = path[:-1], path[-1]

    def edit(content: dict) -> None:
        for key in keys[:-1]:
            content = content.setdefault(key, {})
        content[keys[-1]] = value

    return edit


def remover(*keys: str) -> Callable[[dict], None]:
    def edit(content: dict) -> None:
        for key in keys[:-1]:
            content = content[key]
        del content[keys[-1]]

    return edit


# -- HDF5 -------------------------------------------------------------------------------------------
def datasets(path: Path) -> Dict[str, Tuple[int, ...]]:
    """RETURNS (Dict[str, Tuple[int, ...]]): every dataset of the file by name, with its shape."""
    found: Dict[str, Tuple[int, ...]] = {}
    with h5py.File(path, "r") as f:
        f.visititems(lambda name, item: found.__setitem__(name, item.shape) if isinstance(item, h5py.Dataset) else None)
    return found


def hdf5_drop(path: Path, name: str) -> None:
    with h5py.File(path, "r+") as f:
        del f[name]


def hdf5_swap(path: Path, first: str, second: str) -> None:
    with h5py.File(path, "r+") as f:
        f.move(first, first + "__swap")
        f.move(second, first)
        f.move(first + "__swap", second)


def hdf5_replace(path: Path, name: str, make: Callable[[h5py.Group, str], None]) -> None:
    """Delete dataset ``name`` and let ``make(parent_group, base_name)`` put something in its place."""
    with h5py.File(path, "r+") as f:
        parent, _, base = name.rpartition("/")
        del f[name]
        make(f[parent] if parent else f, base)


def huge_dataset(shape: Tuple[int, ...]) -> Callable[[h5py.Group, str], None]:
    """A float32 dataset declared ``shape``, gzip-chunked and never written: a few KB on disk."""

    def make(group: h5py.Group, name: str) -> None:
        chunks = tuple(min(n, 1024) for n in shape)
        group.create_dataset(name, shape=shape, dtype="f4", chunks=chunks, compression="gzip")

    return make


def typed_dataset(shape: Tuple[int, ...], dtype: object) -> Callable[[h5py.Group, str], None]:
    """A dataset of ``shape`` and ``dtype`` (strings, complex, integers, float64, ...)."""

    def make(group: h5py.Group, name: str) -> None:
        if dtype == "str":
            group.create_dataset(name, data=np.full(shape or (1,), "x", dtype=object), dtype=h5py.string_dtype())
        else:
            group.create_dataset(name, data=np.ones(shape, dtype=dtype))

    return make


def group_in_place(group: h5py.Group, name: str) -> None:
    group.create_group(name).create_dataset("inside", data=np.ones(3, "f4"))


# -- safetensors ------------------------------------------------------------------------------------
def safetensors_header(path: Path) -> Tuple[dict, bytes]:
    """RETURNS: the header's JSON and the bytes after it."""
    data = path.read_bytes()
    (length,) = struct.unpack("<Q", data[:8])
    return json.loads(data[8:8 + length]), data[8 + length:]


def write_safetensors(path: Path, header: object, body: bytes, *, length: Optional[int] = None) -> None:
    """Write a safetensors file from a header (any JSON, or raw bytes) and its body; ``length``
    overrides the declared header length."""
    raw = header if isinstance(header, bytes) else json.dumps(header).encode("utf-8")
    path.write_bytes(struct.pack("<Q", len(raw) if length is None else length) + raw + body)


# -- zip --------------------------------------------------------------------------------------------
def zip_members(path: Path) -> Dict[str, bytes]:
    with zipfile.ZipFile(path) as z:
        return {info.filename: z.read(info) for info in z.infolist()}


def write_zip(path: Path, members: Iterable[Tuple[object, bytes]], *, bomb: Optional[Tuple[str, int]] = None) -> None:
    """A zip of ``members`` ((name or ZipInfo, bytes)), then, with ``bomb`` (name, size), a member of
    ``size`` zero bytes, deflated as it is written 1 MiB at a time."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as z:
        for name, data in members:
            z.writestr(_dated(name), data)
        if bomb is not None:
            name, size = bomb
            with z.open(_dated(name), "w", force_zip64=True) as out:
                chunk = bytes(MIB)
                for start in range(0, size, MIB):
                    out.write(chunk[:min(MIB, size - start)])


def _dated(name: object) -> zipfile.ZipInfo:
    """A member's ZipInfo with a fixed date (a name alone gets the clock's), compressed."""
    if isinstance(name, zipfile.ZipInfo):
        return name
    info = zipfile.ZipInfo(str(name), date_time=(2020, 1, 1, 0, 0, 0))
    info.compress_type = zipfile.ZIP_DEFLATED
    return info


def zip_link(name: str, target: str) -> Tuple[zipfile.ZipInfo, bytes]:
    """A zip member that unzip would make a symbolic link to ``target``."""
    info = zipfile.ZipInfo(name)
    info.create_system = 3  # Unix
    info.external_attr = (0o120777 << 16)
    return info, target.encode("utf-8")


def zip_patch(path: Path, member: str, local: int, central: int, change: Callable[[int], int], fmt: str = "<I") -> None:
    """Rewrite a field of ``member``'s local header (at byte ``local``) and central directory entry
    (at byte ``central``) to ``change(old value)``: the sizes or flags a zip declares, lying."""
    data = bytearray(path.read_bytes())
    with zipfile.ZipFile(io.BytesIO(bytes(data))) as z:
        info = z.getinfo(member)
    (old,) = struct.unpack_from(fmt, data, info.header_offset + local)
    struct.pack_into(fmt, data, info.header_offset + local, change(old))
    name = member.encode("utf-8")
    entry = data.rfind(b"PK\x01\x02", 0, len(data))
    while entry >= 0:
        if data[entry + 46:entry + 46 + len(name)] == name:
            struct.pack_into(fmt, data, entry + central, change(old))
            break
        entry = data.rfind(b"PK\x01\x02", 0, entry)
    path.write_bytes(bytes(data))


def zip_declared_size(path: Path, member: str, size: int) -> None:
    """The uncompressed size a (non-zip64) ``member`` declares, set to ``size``; the data stays."""
    zip_patch(path, member, 22, 24, lambda old: size)


def zip_encrypted(path: Path, member: str) -> None:
    """``member`` flagged as encrypted (its data unchanged)."""
    zip_patch(path, member, 6, 8, lambda old: old | 0x1, "<H")


# -- tar --------------------------------------------------------------------------------------------
class Zeros(io.RawIOBase):
    """``size`` zero bytes, read in chunks (a member body that never sits in memory whole)."""

    def __init__(self, size: int) -> None:
        self.left = size

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        n = min(len(buffer), self.left)
        buffer[:n] = bytes(n)
        self.left -= n
        return n


def tar_members(path: Path) -> Dict[str, Tuple[tarfile.TarInfo, Optional[bytes]]]:
    with tarfile.open(path, "r:*") as tar:
        return {m.name: (m, tar.extractfile(m).read() if m.isreg() else None) for m in tar.getmembers()}


def write_tar(path: Path, members: Iterable[Tuple[tarfile.TarInfo, Optional[bytes]]],
              *, bomb: Optional[Tuple[str, int]] = None) -> None:
    """A .tar.gz of ``members`` (TarInfo, body or None), then with ``bomb`` (name, size) a regular
    member of ``size`` zero bytes, compressed as it is written."""
    with gzip.GzipFile(path, "wb", compresslevel=9, mtime=0) as packed, \
            tarfile.open(fileobj=packed, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for info, body in members:
            copy = tarfile.TarInfo(info.name)
            for field in ("type", "linkname", "mode", "mtime", "devmajor", "devminor"):
                setattr(copy, field, getattr(info, field))
            copy.size = len(body) if body is not None else 0
            tar.addfile(copy, io.BytesIO(body) if body is not None else None)
        if bomb is not None:
            info = tarfile.TarInfo(bomb[0])
            info.size = bomb[1]
            tar.addfile(info, io.BufferedReader(Zeros(bomb[1]), buffer_size=MIB))


def tar_entry(name: str, kind: bytes, *, linkname: str = "", body: Optional[bytes] = None) -> Tuple[tarfile.TarInfo, Optional[bytes]]:
    """A tar member of type ``kind`` (tarfile.SYMTYPE, LNKTYPE, CHRTYPE, FIFOTYPE, DIRTYPE, REGTYPE)."""
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = linkname
    if kind == tarfile.CHRTYPE:
        info.devmajor, info.devminor = 1, 5  # /dev/zero
    return info, body


def gzip_zeros(path: Path, size: int) -> None:
    """A gzip stream of ``size`` zero bytes under the archive's name (no tar inside)."""
    with gzip.GzipFile(path, "wb", compresslevel=9, mtime=0) as out:
        chunk = bytes(MIB)
        for start in range(0, size, MIB):
            out.write(chunk[:min(MIB, size - start)])


def copy_fixture(source: Path, target: Path) -> Path:
    """Copy a fixture file or folder to ``target`` (its parents made)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    if source.is_dir():
        shutil.copytree(source, target)
    else:
        shutil.copyfile(source, target)
    os.chmod(target, 0o755 if target.is_dir() else 0o644)
    return target
