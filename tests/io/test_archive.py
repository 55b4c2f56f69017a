"""Published biLMs as zips (NLPL's ELMo archives, ELMoForManyLangs' zips): read exactly, by member base
names only; a zip that is no model says what it holds."""
import json
import tempfile
import zipfile
from pathlib import Path

import pytest
import torch

from spacy_elmo.bilm import batch_char_ids
from spacy_elmo.io import ModelFileError, load_allennlp
from spacy_elmo.io.archive import archive_contents, load_archive

from ..conftest import TINY

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


def test_member_paths_never_decide_where_files_go(tmp_path, monkeypatch):
    path = tmp_path / "evil.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.write(TINY / "options.json", "../../escaped/options.json")
        archive.write(TINY / "weights.hdf5", "/abs-escaped/model.hdf5")
    # the private folder is made under tmp_path/work, so "../../escaped" would land in tmp_path
    (tmp_path / "work").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "work"))
    bilm = load_archive(path)
    assert bilm.config.n_layers == 2
    assert not list(tmp_path.rglob("escaped")) and not Path("/abs-escaped").exists()
    assert not list((tmp_path / "work").iterdir())  # the private folder is gone afterwards


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
