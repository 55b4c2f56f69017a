"""Published biLMs as zips (NLPL's ELMo archives, ELMoForManyLangs' zips): read exactly, by member base
names only; a zip that is no model says what it holds."""
import functools
import io
import json
import re
import resource
import signal
import struct
import tarfile
import tempfile
import zipfile
import zlib
from pathlib import Path

import pytest
import torch

from spacy_elmo.bilm import batch_char_ids
from spacy_elmo.io import ModelFileError, load_allennlp, load_bilm
from spacy_elmo.io.archive import CHUNK, archive_contents, copy_limited, copy_member, load_archive

from ..conftest import DATA, TINY

SENTENCES = [["Jeg", "satt", "ved", "elvebredden", "."], ["Banken", "hevet", "renten"]]


def nlpl_zip(path, *, folder="", weights_name="model.hdf5", meta=None, extra=()):
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.write(TINY / "options.json", folder + "options.json")
        archive.write(TINY / "weights.hdf5", folder + weights_name)
        archive.writestr(folder + "vocab.txt", "<S>\n</S>\n<UNK>\nbank\n")
        if meta is not None:
            archive.writestr(folder + "meta.json", json.dumps(meta))
        for name, data in extra:
            archive.writestr(name, data)
    return path


def layers(bilm):
    ids, lengths = batch_char_ids(SENTENCES)
    with torch.no_grad():
        return bilm(torch.from_numpy(ids), torch.from_numpy(lengths)).layers


@pytest.mark.parametrize("folder", ["", "209/"])
def test_an_nlpl_archive_loads_the_same_biLM_as_its_files(tmp_path, folder):
    path = nlpl_zip(tmp_path / "209.zip", folder=folder, meta={"corpus": [{"language": "nor", "tokens": 2e9}]})
    contents = archive_contents(path)
    assert contents.family == "allennlp" and contents.weights == folder + "model.hdf5"
    assert contents.language == "nor"
    expected = layers(load_allennlp(TINY / "options.json", TINY / "weights.hdf5"))
    assert torch.equal(layers(load_archive(path)), expected)


@pytest.mark.parametrize("name", ["../../escaped/options.json", "a/../../escaped/options.json", "C:/escaped/options.json"])
def test_members_named_like_paths_are_refused_and_nothing_is_written(tmp_path, monkeypatch, name):
    path = tmp_path / "evil.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(name, (TINY / "options.json").read_bytes())  # as named: write() would normalise it
        archive.write(TINY / "weights.hdf5", "model.hdf5")
    (tmp_path / "work").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "work"))
    with pytest.raises(ModelFileError, match=rf"evil.zip: member '{re.escape(name)}' is named by .*path"):
        load_archive(path)
    assert not list(tmp_path.rglob("escaped")) and not list((tmp_path / "work").iterdir())


def _crc32_of_zeros(n: int) -> int:
    """``zlib.crc32(bytes(n))`` without the bytes: CRC-32's register takes a zero byte by a linear
    map (32 columns), applied n times by repeated squaring."""
    def apply(columns, state):
        return functools.reduce(lambda acc, i: acc ^ columns[i] if state >> i & 1 else acc, range(32), 0)

    power = [~zlib.crc32(b"\0", ~(1 << i) & 0xFFFFFFFF) & 0xFFFFFFFF for i in range(32)]
    state = 0xFFFFFFFF
    while n:
        if n & 1:
            state = apply(power, state)
        power = [apply(power, column) for column in power]
        n >>= 1
    return ~state & 0xFFFFFFFF


def test_the_crc_of_zeros_is_zlibs():
    assert [_crc32_of_zeros(n) for n in (0, 1, 1000, 65537)] == [zlib.crc32(bytes(n)) for n in (0, 1, 1000, 65537)]


def _zip_bomb(path: Path, member: str, size: int) -> None:
    """A zip whose ``member`` inflates from about size/1000 bytes to ``size`` zeros: a deflate
    stream of identical blocks (each 16 MiB of zeros, compressed once and repeated), written with
    its own headers so that building it takes no 1.5 GiB of compression."""
    chunk = 16 << 20
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    block = compressor.compress(bytes(chunk)) + compressor.flush(zlib.Z_FULL_FLUSH)
    assert compressor.compress(bytes(chunk)) + compressor.flush(zlib.Z_FULL_FLUSH) == block  # repeatable
    end = compressor.flush(zlib.Z_FINISH)
    crc = _crc32_of_zeros(size)
    stored = len(block) * (size // chunk) + len(end)
    name = member.encode()
    fields = struct.pack("<HHHHHIII", 20, 0, 8, 0, 0x21, crc, stored, size)
    with open(path, "wb") as out:
        out.write(b"PK\x03\x04" + fields + struct.pack("<HH", len(name), 0) + name)
        for _ in range(size // chunk):
            out.write(block)
        out.write(end)
        directory = out.tell()
        out.write(b"PK\x01\x02" + struct.pack("<H", 20) + fields + struct.pack("<HHHHHII", len(name), 0, 0, 0, 0, 0, 0) + name)
        listed = out.tell() - directory
        out.write(b"PK\x05\x06" + struct.pack("<HHHHIIH", 0, 0, 1, 1, listed, directory, 0))


def test_a_zip_bomb_is_refused_by_its_declared_sizes_before_anything_is_written(tmp_path, monkeypatch):
    path = tmp_path / "bomb.zip"
    _zip_bomb(path, "model.hdf5", 3 * 2**29)  # 1.5 GiB of zeros
    with zipfile.ZipFile(path, "a") as archive:
        archive.write(TINY / "options.json", "options.json")
    assert path.stat().st_size < 2 * 10**6 and zipfile.ZipFile(path).getinfo("model.hdf5").file_size == 3 * 2**29
    (tmp_path / "work").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "work"))
    # a guard, should the check ever go: no file of more than 100 MB can be written meanwhile
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (100 * 10**6, hard))
    try:
        with pytest.raises(ModelFileError) as refused:
            load_archive(path)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, handler)
    assert str(refused.value).startswith(f"{path}: model.hdf5 declares 1610612736 bytes, more than the ")
    assert "spacy-elmo-archive" not in str(refused.value)
    assert not list((tmp_path / "work").iterdir())  # nothing left on disk
    # without the pair's options to size it, the inflation ratio alone refuses it
    alone = tmp_path / "alone.zip"
    _zip_bomb(alone, "encoder.pkl", 64 << 20)
    with zipfile.ZipFile(alone) as archive, pytest.raises(ModelFileError, match=r"encoder.pkl inflates \d+ times"):
        copy_member(archive, archive.getinfo("encoder.pkl"), tmp_path / "encoder.pkl", alone)
    assert not (tmp_path / "encoder.pkl").exists()


def test_a_member_larger_than_it_declares_is_cut_off_at_the_limit(tmp_path):
    source = io.BytesIO(bytes(3 * CHUNK))
    with pytest.raises(ModelFileError, match=r"m.zip: model.hdf5 holds more than the 2097152 bytes"):
        copy_limited(source, tmp_path / "out", 2 * CHUNK, archive="m.zip", member="model.hdf5")
    assert not (tmp_path / "out").exists()


def test_errors_of_a_zipped_pair_name_the_zip_and_its_member_not_a_private_folder(tmp_path):
    options = json.loads((TINY / "options.json").read_text())
    options["lstm"]["dim"] = 65
    path = tmp_path / "pair.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("209/options.json", json.dumps(options))
        archive.write(TINY / "weights.hdf5", "209/model.hdf5")
    with pytest.raises(ModelFileError) as refused:
        load_archive(path)
    message = str(refused.value)
    assert message.startswith(f"{path}: 209/model.hdf5: dataset ") and f"{path}:209/options.json implies" in message
    assert "spacy-elmo-archive" not in message


def test_an_archive_without_weights_or_damaged_says_what_is_wrong(tmp_path):
    path = tmp_path / "no-weights.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.write(TINY / "options.json", "options.json")
        archive.writestr("vocab.txt", "<S>\n")
    for read in (archive_contents, load_archive):
        with pytest.raises(ModelFileError, match=r"or config.json, token_embedder.pkl, encoder.pkl \(an "
                                                 r"ELMoForManyLangs model\); this one holds options\.json, vocab\.txt"):
            read(path)
    damaged = nlpl_zip(tmp_path / "damaged.zip")
    data = bytearray(damaged.read_bytes())
    offset = data.find(b"HDF") if data.find(b"HDF") > 0 else len(data) // 2
    for k in range(offset + 64, offset + 64 + 256):  # the stored bytes of a member, not its header
        data[k] ^= 0xFF
    damaged.write_bytes(bytes(data))
    with pytest.raises(ModelFileError, match="damaged.zip"):
        load_archive(damaged)
    not_zip = tmp_path / "model.zip"
    not_zip.write_bytes(b"not a zip")
    for read in (archive_contents, load_archive):
        with pytest.raises(ModelFileError, match="not a readable zip"):
            read(not_zip)


def test_a_damaged_meta_json_leaves_the_language_unknown_and_the_weights_readable(tmp_path):
    path = nlpl_zip(tmp_path / "m.zip", extra=[("meta.json", "{not json")])
    assert archive_contents(path).language is None and load_archive(path).config.dim == 64


def _tar_with(path: Path, member: tarfile.TarInfo) -> Path:
    with tarfile.open(path, "w:gz") as archive:
        for source in sorted((DATA / "bilm_tf" / "checkpoint_folder").iterdir()):
            archive.add(source, f"ckpt/{source.name}")
        archive.addfile(member, io.BytesIO(b"x" * member.size) if member.isreg() else None)
    return path


@pytest.mark.parametrize("kind, name, problem", [
    (tarfile.SYMTYPE, "ckpt/vocab-link.txt", "is a link"),
    (tarfile.LNKTYPE, "ckpt/hard.txt", "is a link"),
    (tarfile.CHRTYPE, "ckpt/tty", "is a device or other special file"),
    (tarfile.REGTYPE, "../outside.txt", "is named by a path that climbs out"),
    (tarfile.REGTYPE, "/etc/model.txt", "is named by an absolute path"),
])
def test_links_devices_and_path_like_names_in_a_tarball_are_refused_naming_them(tmp_path, kind, name, problem):
    member = tarfile.TarInfo(name)
    member.type = kind
    if kind in (tarfile.SYMTYPE, tarfile.LNKTYPE):
        member.linkname = "/etc/passwd"
    member.size = 1 if kind == tarfile.REGTYPE else 0
    path = _tar_with(tmp_path / "model.tar.gz", member)
    with pytest.raises(ModelFileError, match=rf"model.tar.gz: member '{re.escape(name)}' {problem}"):
        load_bilm(path)


def test_a_tarball_member_that_inflates_far_beyond_the_archive_is_refused_from_its_header(tmp_path):
    path = tmp_path / "bomb.tar.gz"
    with tarfile.open(path, "w:gz") as archive:
        for source in sorted((DATA / "bilm_tf" / "checkpoint_folder").iterdir()):
            if ".data-" not in source.name:
                archive.add(source, f"ckpt/{source.name}")
        member = tarfile.TarInfo("ckpt/model.ckpt-24.data-00000-of-00001")
        member.size = 64 << 20
        archive.addfile(member, io.BytesIO(bytes(member.size)))
    assert path.stat().st_size < 10**6
    with pytest.raises(ModelFileError, match=r"bomb.tar.gz: ckpt/model.ckpt-24.data-00000-of-00001 inflates \d+ times"):
        load_bilm(path)



def test_an_archive_with_more_model_files_than_a_model_has_is_refused_before_copying(tmp_path):
    path = tmp_path / "many.zip"
    with zipfile.ZipFile(DATA / "elmoformanylangs" / "published" / "relative-config-path.zip") as source, \
            zipfile.ZipFile(path, "w") as archive:
        for info in source.infolist():
            archive.writestr(info, source.read(info))
        for k in range(100):
            archive.writestr(f"extra/{k}.json", b"{}")
    with pytest.raises(ModelFileError, match=r"many.zip: holds 10\d files a model would be read from .*at most 64"):
        load_archive(path)
