"""TensorFlow's checkpoint format (the "tensor bundle"), read without TensorFlow.

A checkpoint ``PREFIX`` is ``PREFIX.index`` and one or more ``PREFIX.data-0000k-of-0000n``
shards. The index is a LevelDB-style SSTable (TensorFlow's ``table``): data blocks of
prefix-compressed keys with restart points, an index block of block handles, a 48-byte footer
ending in a magic number, each block followed by a compression byte and a masked CRC-32C. Its
values are protobufs: the empty key holds a ``BundleHeaderProto`` (shard count, endianness), every
other key (a variable name) a ``BundleEntryProto`` (dtype, shape, shard, offset, size, masked
CRC-32C of the bytes). A shard is the tensors' raw little-endian bytes, back to back.

Everything is checked, what the index declares before anything is allocated (an entry's dtype and
shape against its size, its offset and size against its shard's length), then block and tensor
checksums. Snappy-compressed
blocks (TensorFlow writes none) and partitioned or string tensors (no biLM variable is one) are
refused by name rather than misread. No TensorFlow, protobuf library or pickle is used.
"""
import math
import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Callable, Dict, Iterator, List, Optional, Tuple, Union

import numpy as np

from .errors import ModelFileError

PathLike = Union[str, Path]
TABLE_MAGIC = 0xDB4775248B80FB57
FOOTER_SIZE = 48
BLOCK_TRAILER_SIZE = 5
CRC_MASK_DELTA = 0xA282EAD8
# tensorflow/core/framework/types.proto: the numeric dtypes a variable can have
DTYPES = {
    1: np.dtype("<f4"), 2: np.dtype("<f8"), 3: np.dtype("<i4"), 4: np.dtype("u1"), 5: np.dtype("<i2"),
    6: np.dtype("i1"), 9: np.dtype("<i8"), 10: np.dtype("?"), 14: np.dtype("<u2"), 17: np.dtype("<u2"),
    19: np.dtype("<f2"), 22: np.dtype("<u4"), 23: np.dtype("<u8"),
}
DT_BFLOAT16 = 14
DTYPE_NAMES = {7: "string", 8: "complex64", 18: "complex128", 20: "resource", 21: "variant"}
# a biLM's index is kilobytes (one entry per variable); the bytes an index may hold, read whole
MAX_INDEX_BYTES = 64 << 20


def _crc_table() -> np.ndarray:
    table = np.zeros(256, dtype=np.uint32)
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)  # Castagnoli, reflected
        table[byte] = crc
    return table


CRC_TABLE = _crc_table()
_TABLE = [int(x) for x in CRC_TABLE]


def crc32c(data: bytes) -> int:
    """CRC-32C (Castagnoli) of ``data``. Long inputs are cut into equal chunks whose CRCs numpy
    computes side by side, then joined with the linear map "feed L zero bytes", which is computed in
    the same pass from the 32 unit states (CRC is linear over GF(2)): seconds for a gigabyte.

    data (bytes): the bytes.
    RETURNS (int): the CRC (as TensorFlow's ``crc32c::Value``).
    """
    view = np.frombuffer(data, dtype=np.uint8)
    n = len(view)
    length = max(64, int(n**0.5) & ~7)
    head = n % length
    state = _crc_bytes(0xFFFFFFFF, view[:head].tobytes())
    chunks = (n - head) // length
    if chunks:
        rows = view[head:].reshape(chunks, length)
        regs = np.concatenate([np.zeros(chunks, np.uint32), (np.uint32(1) << np.arange(32, dtype=np.uint32))])
        for start in range(0, length, 256):
            block = np.ascontiguousarray(rows[:, start : start + 256].T)
            for column in block:
                low = (regs[:chunks] ^ column) & 0xFF
                regs[:chunks] = CRC_TABLE[low] ^ (regs[:chunks] >> 8)
                regs[chunks:] = CRC_TABLE[regs[chunks:] & 0xFF] ^ (regs[chunks:] >> 8)
        shift = [int(x) for x in regs[chunks:]]
        byte_tables = [[_apply(shift, b << (8 * k)) for b in range(256)] for k in range(4)]
        for raw in regs[:chunks].tolist():
            state = (
                byte_tables[0][state & 0xFF] ^ byte_tables[1][(state >> 8) & 0xFF]
                ^ byte_tables[2][(state >> 16) & 0xFF] ^ byte_tables[3][state >> 24] ^ raw
            )
    return state ^ 0xFFFFFFFF


def _crc_bytes(state: int, data: bytes) -> int:
    for byte in data:
        state = _TABLE[(state ^ byte) & 0xFF] ^ (state >> 8)
    return state


def _apply(columns: List[int], value: int) -> int:
    out, bit = 0, 0
    while value:
        if value & 1:
            out ^= columns[bit]
        value >>= 1
        bit += 1
    return out


def masked_crc32c(data: bytes) -> int:
    """The CRC-32C as LevelDB and TensorFlow store it (rotated and offset, so a CRC of data that
    holds CRCs is not itself trivial)."""
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + CRC_MASK_DELTA) & 0xFFFFFFFF


@dataclass(frozen=True)
class BundleEntry:
    """Where one tensor lives: ``dtype`` (TF enum), ``shape``, ``shard``, ``offset``, ``size`` in
    bytes, ``crc`` (masked CRC-32C of the bytes)."""

    name: str
    dtype: int
    shape: Tuple[int, ...]
    shard: int
    offset: int
    size: int
    crc: Optional[int]


class TensorBundle:
    """A TensorFlow checkpoint, read without TensorFlow.

    index (bytes): the ``.index`` file's bytes.
    open_shard (Callable[[int], Tuple[BinaryIO, int]]): opens data shard k: a binary file, read
        forward, and its length in bytes (what the file or archive member holds).
    source (PathLike): what to name in errors (the checkpoint prefix).
    """

    def __init__(self, index: bytes, open_shard: Callable[[int], Tuple[BinaryIO, int]], *, source: PathLike) -> None:
        self.source = str(source)
        self._open_shard = open_shard
        self.num_shards = 1
        self.entries: Dict[str, BundleEntry] = {}
        for key, value in _table_items(index, self.source):
            if key == b"":
                self.num_shards, big_endian = _parse_header(value, self.source)
                if big_endian:
                    raise ModelFileError(self.source, "a big-endian checkpoint; only little-endian ones are read")
                continue
            name = key.decode("utf-8", errors="replace")
            self.entries[name] = _parse_entry(name, value, self.source)
        for entry in self.entries.values():
            if not 0 <= entry.shard < self.num_shards:
                raise ModelFileError(self.source, f"tensor {entry.name!r} is in shard {entry.shard} of {self.num_shards}: the index is damaged")

    @classmethod
    def open(cls, prefix: PathLike) -> "TensorBundle":
        """The checkpoint at ``prefix`` (``prefix.index`` beside its data shards)."""
        prefix = Path(prefix)
        index = Path(f"{prefix}.index")
        if not index.is_file():
            raise ModelFileError(index, "checkpoint index not found")
        if index.stat().st_size > MAX_INDEX_BYTES:
            raise ModelFileError(index, f"{index.stat().st_size} bytes, more than a checkpoint index of a biLM "
                                        f"({MAX_INDEX_BYTES}): not one, or damaged")

        def open_shard(k: int) -> Tuple[BinaryIO, int]:
            path = Path(f"{prefix}.data-{k:05d}-of-{bundle.num_shards:05d}")
            if not path.is_file():
                raise ModelFileError(path, "checkpoint data shard not found; copy every .data-* file beside the .index")
            handle = open(path, "rb")
            return handle, os.fstat(handle.fileno()).st_size

        bundle = cls(index.read_bytes(), open_shard, source=prefix)
        return bundle

    def __contains__(self, name: str) -> bool:
        return name in self.entries

    def names(self) -> List[str]:
        """RETURNS (List[str]): the tensor names, sorted."""
        return sorted(self.entries)

    def read(self, name: str, *, verify: bool = True) -> np.ndarray:
        """The tensor ``name`` as a numpy array (bfloat16 widened to float32).

        verify (bool): check the stored CRC-32C of its bytes (a damaged file is refused).
        """
        entry = self.entries.get(name)
        if entry is None:
            raise ModelFileError(self.source, f"no tensor {name!r} in this checkpoint")
        return self.read_many([name], verify=verify)[name]

    def read_many(self, names: List[str], *, verify: bool = True) -> Dict[str, np.ndarray]:
        """Several tensors, read in file order (cheap on a compressed stream that cannot seek back).
        Every entry of a shard read is checked against the shard's length, and every tensor asked
        for by its dtype and shape against its size, before a byte is read or allocated."""
        missing = [n for n in names if n not in self.entries]
        if missing:
            raise ModelFileError(self.source, f"no tensor {missing[0]!r} in this checkpoint")
        entries = sorted((self.entries[n] for n in names), key=lambda e: (e.shard, e.offset))
        out: Dict[str, np.ndarray] = {}
        handles: Dict[int, BinaryIO] = {}
        try:
            for shard in sorted({entry.shard for entry in entries}):
                handles[shard], length = self._open_shard(shard)
                for entry in self.entries.values():  # a shard shorter than its index says is truncated
                    if entry.shard == shard:
                        self._check_bounds(entry, length)
            for entry in entries:
                self._check_size(entry)
            for entry in entries:
                out[entry.name] = self._read_entry(entry, handles[entry.shard], verify)
        finally:
            for handle in handles.values():
                handle.close()
        return out

    def _check_bounds(self, entry: BundleEntry, shard_length: int) -> None:
        if entry.offset + entry.size > shard_length:
            raise ModelFileError(
                self.source, f"tensor {entry.name!r} declares bytes {entry.offset}..{entry.offset + entry.size} of data "
                             f"shard {entry.shard}, which holds {shard_length}: the file is truncated or the index damaged"
            )

    def _check_size(self, entry: BundleEntry) -> None:
        """That ``entry`` is numeric and its dtype and shape make its size."""
        dtype = DTYPES.get(entry.dtype)
        if dtype is None:
            kind = DTYPE_NAMES.get(entry.dtype, f"TF dtype {entry.dtype}")
            raise ModelFileError(self.source, f"tensor {entry.name!r} is a {kind} tensor; only numeric tensors are read")
        if math.prod(entry.shape) * dtype.itemsize != entry.size:
            raise ModelFileError(
                self.source, f"tensor {entry.name!r}: {entry.size} bytes stored for shape {entry.shape}; the index is damaged"
            )

    def _read_entry(self, entry: BundleEntry, handle: BinaryIO, verify: bool) -> np.ndarray:
        dtype = DTYPES[entry.dtype]
        handle.seek(entry.offset)
        data = bytearray(entry.size)  # filled in place: the array below is a view of it, not a copy
        if handle.readinto(data) != entry.size:
            raise ModelFileError(
                self.source, f"tensor {entry.name!r} runs past the end of data shard {entry.shard}: the file is truncated"
            )
        if verify and entry.crc is not None and masked_crc32c(data) != entry.crc:
            raise ModelFileError(
                self.source, f"tensor {entry.name!r} fails its checksum: the data file is damaged; download it again"
            )
        array = np.frombuffer(data, dtype=dtype).reshape(entry.shape)
        if entry.dtype == DT_BFLOAT16:
            return (array.astype(np.uint32) << 16).view(np.float32)
        return array.astype(dtype.newbyteorder("="), copy=False)


# --- the SSTable ---------------------------------------------------------------------------


def _table_items(data: bytes, source: str) -> Iterator[Tuple[bytes, bytes]]:
    if len(data) < FOOTER_SIZE:
        raise ModelFileError(source, f"checkpoint index of {len(data)} bytes is too short to be one (truncated?)")
    footer = data[-FOOTER_SIZE:]
    if struct.unpack("<Q", footer[-8:])[0] != TABLE_MAGIC:
        raise ModelFileError(source, "checkpoint index does not end in the table magic number: not a TF checkpoint index, or truncated")
    pos = 0
    _, pos = _block_handle(footer, pos, source)  # the metaindex block: TF writes it empty
    index_handle, _ = _block_handle(footer, pos, source)
    for _, handle_bytes in _block_items(_read_block(data, index_handle, source), source):
        block_handle, _ = _block_handle(handle_bytes, 0, source)
        yield from _block_items(_read_block(data, block_handle, source), source)


def _block_handle(data: bytes, pos: int, source: str) -> Tuple[Tuple[int, int], int]:
    offset, pos = _varint(data, pos, source)
    size, pos = _varint(data, pos, source)
    return (offset, size), pos


def _read_block(data: bytes, handle: Tuple[int, int], source: str) -> bytes:
    offset, size = handle
    end = offset + size + BLOCK_TRAILER_SIZE
    if end > len(data) - FOOTER_SIZE:
        raise ModelFileError(source, "a block of the checkpoint index lies past its end: the file is damaged")
    block, kind = data[offset : offset + size], data[offset + size]
    (stored,) = struct.unpack("<I", data[offset + size + 1 : end])
    if masked_crc32c(data[offset : offset + size + 1]) != stored:
        raise ModelFileError(source, "a block of the checkpoint index fails its checksum: the file is damaged")
    if kind == 1:
        raise ModelFileError(source, "the checkpoint index has snappy-compressed blocks, which are not read; re-save it with TensorFlow")
    if kind != 0:
        raise ModelFileError(source, f"unknown block compression {kind} in the checkpoint index")
    return block


def _block_items(block: bytes, source: str) -> Iterator[Tuple[bytes, bytes]]:
    if len(block) < 4:
        raise ModelFileError(source, "an empty block in the checkpoint index: the file is damaged")
    (restarts,) = struct.unpack("<I", block[-4:])
    limit = len(block) - 4 - 4 * restarts
    if limit < 0:
        raise ModelFileError(source, "bad restart count in a checkpoint index block: the file is damaged")
    pos, key = 0, b""
    while pos < limit:
        shared, pos = _varint(block, pos, source)
        unshared, pos = _varint(block, pos, source)
        length, pos = _varint(block, pos, source)
        if shared > len(key) or pos + unshared + length > limit:
            raise ModelFileError(source, "a corrupt entry in a checkpoint index block")
        key = key[:shared] + block[pos : pos + unshared]
        pos += unshared
        yield key, block[pos : pos + length]
        pos += length


# --- protobuf wire format ------------------------------------------------------------------


def _varint(data: bytes, pos: int, source: str) -> Tuple[int, int]:
    result, shift = 0, 0
    while True:
        if pos >= len(data) or shift > 63:
            raise ModelFileError(source, "a truncated or overlong varint in the checkpoint index")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def _fields(data: bytes, source: str) -> Iterator[Tuple[int, int, Union[int, bytes]]]:
    """(field number, wire type, value) of a protobuf message."""
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos, source)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(data, pos, source)
        elif wire == 1:
            value, pos = struct.unpack("<Q", data[pos : pos + 8])[0], pos + 8
        elif wire == 2:
            length, pos = _varint(data, pos, source)
            value, pos = data[pos : pos + length], pos + length
        elif wire == 5:
            value, pos = struct.unpack("<I", data[pos : pos + 4])[0], pos + 4
        else:
            raise ModelFileError(source, f"unsupported protobuf wire type {wire} in the checkpoint index")
        if pos > len(data):
            raise ModelFileError(source, "a truncated record in the checkpoint index")
        yield number, wire, value


def _parse_header(value: bytes, source: str) -> Tuple[int, bool]:
    num_shards, big_endian = 1, False
    for number, _, field in _fields(value, source):
        if number == 1:
            num_shards = int(field)
        elif number == 2:
            big_endian = field == 1
    return num_shards, big_endian


def _parse_entry(name: str, value: bytes, source: str) -> BundleEntry:
    dtype, shape, shard, offset, size, crc = 0, (), 0, 0, 0, None
    for number, _, field in _fields(value, source):
        if number == 1:
            dtype = int(field)
        elif number == 2:
            shape = _parse_shape(name, field, source)
        elif number == 3:
            shard = int(field)
        elif number == 4:
            offset = int(field)
        elif number == 5:
            size = int(field)
        elif number == 6:
            crc = int(field)
        elif number == 7:
            raise ModelFileError(source, f"tensor {name!r} is partitioned into slices, which are not read")
    return BundleEntry(name, dtype, shape, shard, offset, size, crc)


def _parse_shape(name: str, data: bytes, source: str) -> Tuple[int, ...]:
    dims = []
    for number, _, field in _fields(data, source):
        if number == 2:
            size = next((int(v) for n, _, v in _fields(field, source) if n == 1), 0)
            if size >= 2**63:
                raise ModelFileError(source, f"tensor {name!r} has an unknown dimension")
            dims.append(size)
        elif number == 3 and field:
            raise ModelFileError(source, f"tensor {name!r} has an unknown rank")
    return tuple(dims)
