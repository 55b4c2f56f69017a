"""TensorFlow's checkpoint format read without TensorFlow: the tiny bilm-tf checkpoint in
tests/data/bilm_tf (written by TensorFlow 2.21's own saver) read back, and damage refused."""
import dataclasses
import json
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest

from spacy_elmo.io import ModelFileError
from spacy_elmo.io.tf_bundle import TensorBundle, crc32c, masked_crc32c
from spacy_elmo.io import tf_bundle

DATA = Path(__file__).parent.parent / "data" / "bilm_tf"
PREFIX = "model.ckpt-24"


def _bytewise_crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def test_crc32c_matches_the_standard_check_value():
    assert crc32c(b"123456789") == 0xE3069283  # RFC 3720's CRC-32C check value
    assert crc32c(b"") == 0


@pytest.mark.parametrize("n", [1, 63, 64, 65, 511, 4096 + 7, 70001])
def test_crc32c_in_chunks_equals_the_bytewise_definition(n):
    data = np.random.default_rng(n).integers(0, 256, n, dtype=np.uint8).tobytes()
    assert crc32c(data) == _bytewise_crc32c(data)


@pytest.fixture
def folder(tmp_path):
    target = tmp_path / "ckpt"
    shutil.copytree(DATA / "checkpoint_folder", target)
    return target


def test_every_tensor_reads_back_as_tensorflow_wrote_it():
    bundle = TensorBundle.open(DATA / "checkpoint_folder" / PREFIX)
    reference = json.loads((DATA / "reference.json").read_text())
    assert bundle.names() == sorted(reference["variables"])
    tensors = bundle.read_many(bundle.names())
    for name, shape in reference["variables"].items():
        assert list(tensors[name].shape) == shape, name
    npz = np.load(DATA / "reference.npz", allow_pickle=False)
    assert np.array_equal(tensors["lm/softmax/W"], npz["softmax_W"])
    assert np.array_equal(tensors["lm/softmax/b"], npz["softmax_b"])
    assert float(tensors["global_step"]) == 24  # bilm-tf keeps its step in a float32 scalar
    assert tensors["lm/char_embed"].dtype == np.float32


def test_a_checkpoint_in_two_shards_reads_from_both():
    bundle = TensorBundle.open(DATA / "tfhub_module" / "variables" / "variables")
    assert bundle.num_shards == 2
    assert {entry.shard for entry in bundle.entries.values()} == {0, 1}
    tensors = bundle.read_many(bundle.names())
    assert tensors["bilm/char_embed"].shape == (262, 4)
    assert not tensors["bilm/char_embed"][0].any()  # bilm-tf's inference graph adds a zero padding row


def test_every_stored_checksum_is_the_masked_crc32c_of_the_bytes():
    bundle = TensorBundle.open(DATA / "checkpoint_folder" / PREFIX)
    data = (DATA / "checkpoint_folder" / f"{PREFIX}.data-00000-of-00001").read_bytes()
    for entry in bundle.entries.values():
        assert masked_crc32c(data[entry.offset : entry.offset + entry.size]) == entry.crc


def test_a_flipped_byte_in_the_data_is_refused(folder):
    bundle = TensorBundle.open(folder / PREFIX)
    entry = bundle.entries["lm/softmax/W"]
    data_path = folder / f"{PREFIX}.data-00000-of-00001"
    data = bytearray(data_path.read_bytes())
    data[entry.offset + 3] ^= 0x10
    data_path.write_bytes(bytes(data))
    with pytest.raises(ModelFileError, match="lm/softmax/W.*checksum"):
        TensorBundle.open(folder / PREFIX).read("lm/softmax/W")
    # unverified, the damaged value comes through: the checksum is what caught it
    damaged = TensorBundle.open(folder / PREFIX).read("lm/softmax/W", verify=False)
    assert not np.array_equal(damaged, np.load(DATA / "reference.npz")["softmax_W"])


def test_a_flipped_byte_in_the_index_is_refused(folder):
    index = folder / f"{PREFIX}.index"
    data = bytearray(index.read_bytes())
    data[40] ^= 0x01
    index.write_bytes(bytes(data))
    with pytest.raises(ModelFileError, match="checksum"):
        TensorBundle.open(folder / PREFIX)


@pytest.mark.parametrize("cut", [10, 100])
def test_a_truncated_index_is_refused(folder, cut):
    index = folder / f"{PREFIX}.index"
    index.write_bytes(index.read_bytes()[:-cut])
    with pytest.raises(ModelFileError, match="magic|too short"):
        TensorBundle.open(folder / PREFIX)


def test_a_truncated_data_shard_is_refused(folder):
    data_path = folder / f"{PREFIX}.data-00000-of-00001"
    data_path.write_bytes(data_path.read_bytes()[:1000])
    bundle = TensorBundle.open(folder / PREFIX)
    last = max(bundle.entries.values(), key=lambda e: e.offset).name
    with pytest.raises(ModelFileError, match="truncated"):
        bundle.read(last)


def test_missing_files_are_named(folder):
    with pytest.raises(ModelFileError, match="index not found"):
        TensorBundle.open(folder / "model.ckpt-99")
    (folder / f"{PREFIX}.data-00000-of-00001").unlink()
    with pytest.raises(ModelFileError, match="data-00000-of-00001.*shard not found"):
        TensorBundle.open(folder / PREFIX).read("lm/softmax/b")
    with pytest.raises(ModelFileError, match="no tensor 'lm/nothing'"):
        TensorBundle.open(folder / PREFIX).read("lm/nothing")


def test_snappy_compressed_blocks_are_refused_by_name(folder):
    index = folder / f"{PREFIX}.index"
    data = bytearray(index.read_bytes())
    footer = bytes(data[-tf_bundle.FOOTER_SIZE :])
    _, pos = tf_bundle._block_handle(footer, 0, "test")
    (offset, size), _ = tf_bundle._block_handle(footer, pos, "test")
    data[offset + size] = 1  # the index block's compression byte: snappy
    data[offset + size + 1 : offset + size + 5] = struct.pack("<I", masked_crc32c(bytes(data[offset : offset + size + 1])))
    index.write_bytes(bytes(data))
    with pytest.raises(ModelFileError, match="snappy"):
        TensorBundle.open(folder / PREFIX)


def test_a_file_that_is_no_index_is_refused(folder):
    (folder / f"{PREFIX}.index").write_bytes(b"\0" * 200)
    with pytest.raises(ModelFileError, match="not a TF checkpoint index"):
        TensorBundle.open(folder / PREFIX)


def test_an_index_declaring_more_bytes_than_its_shard_holds_is_refused_before_allocating(folder, monkeypatch):
    bundle = TensorBundle.open(folder / PREFIX)
    entry = bundle.entries["lm/softmax/W"]
    shard = (folder / f"{PREFIX}.data-00000-of-00001").stat().st_size
    rows = 2**40 // (4 * entry.shape[1])  # a terabyte, as a damaged or hostile index could say
    huge = dataclasses.replace(entry, shape=(rows, entry.shape[1]), size=rows * entry.shape[1] * 4)
    bundle.entries[entry.name] = huge
    allocated = []
    monkeypatch.setattr(tf_bundle, "bytearray", lambda n: allocated.append(n) or bytearray(n), raising=False)
    with pytest.raises(ModelFileError, match=rf"'lm/softmax/W' declares bytes {entry.offset}\.\.\d+ of data shard 0, "
                                             rf"which holds {shard}: the file is truncated or the index damaged"):
        bundle.read_many(["lm/softmax/b", "lm/softmax/W"])
    assert allocated == []  # refused before a single tensor's bytes were allocated
    bundle.entries[entry.name] = dataclasses.replace(entry, size=entry.size + 4)  # size against dtype and shape
    with pytest.raises(ModelFileError, match=r"bytes stored for shape .*the index is damaged"):
        bundle.read("lm/softmax/W")
    assert allocated == []


def test_a_shard_cut_short_is_refused_even_where_the_tensors_read_are_intact(folder):
    data_path = folder / f"{PREFIX}.data-00000-of-00001"
    data_path.write_bytes(data_path.read_bytes()[:-1])  # the last entry's last byte: no biLM tensor's
    with pytest.raises(ModelFileError, match=r"declares bytes \d+\.\.\d+ of data shard 0, which holds \d+: the file is truncated"):
        TensorBundle.open(folder / PREFIX).read("lm/char_embed")
