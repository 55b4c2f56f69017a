"""The record beside each download (io/download_record.py): a damaged record is refused, naming it
and what to do; a deleted one never makes a changed file trusted without a word."""
import hashlib
import json
import shutil
from dataclasses import replace

import pytest
import torch

from spacy_elmo import load_bilm
from spacy_elmo.io import ModelFileError, export_allennlp
from spacy_elmo.io.download import Transfer, fetch_published, record_path
from spacy_elmo.io.registry import BASE_URL_ENV, PUBLISHED_MODELS

from ..conftest import load_tiny_bilm
from .test_download import FAST, TINY_MODEL, WEIGHTS, WEIGHTS_PATH, _closed_port_url, _same_weights, server  # noqa: F401

# files placed by hand are checked against their name's published shape: the tiny pair is published
# under a name of its own shape
TINY_WEIGHTS_PATH = TINY_MODEL.weights_url("/")[1:]

pytestmark = pytest.mark.filterwarnings("ignore:.*downloading over plain http:RuntimeWarning")


@pytest.mark.parametrize("damage", ["{not json", '{"url": "x"}', '["sha256"]', '{"sha256": "abc"}'])
def test_a_damaged_record_is_refused_naming_it_and_what_to_do(server, tmp_path, capsys, damage):  # noqa: F811
    server.publish_as(TINY_MODEL)
    tiny = {"tiny": TINY_MODEL}
    _, weights = fetch_published("tiny", models=tiny, transfer=Transfer(**FAST))
    record_path(weights).write_text(damage, encoding="utf-8")
    with pytest.raises(ModelFileError, match="cannot be verified; delete weights.hdf5 and this record") as error:
        fetch_published("tiny", models=tiny, transfer=Transfer(**FAST))
    assert error.value.path == str(record_path(weights))
    assert weights.read_bytes() == WEIGHTS and server.count(TINY_WEIGHTS_PATH) == 1  # neither removed nor fetched
    # what the message offers: the record alone deleted, the file is checked as placed by hand
    record_path(weights).unlink()
    capsys.readouterr()
    assert fetch_published("tiny", models=tiny, transfer=Transfer(**FAST))[1] == weights
    assert "no record of its download" in capsys.readouterr().err
    assert json.loads(record_path(weights).read_text())["sha256"] == hashlib.sha256(WEIGHTS).hexdigest()


def test_a_deleted_record_never_trusts_a_changed_file_without_a_word(server, tmp_path, capsys, monkeypatch):  # noqa: F811
    server.publish_as(TINY_MODEL)
    monkeypatch.setitem(PUBLISHED_MODELS, "tiny", TINY_MODEL)
    _, weights = fetch_published("tiny", transfer=Transfer(**FAST))
    other = load_tiny_bilm()
    with torch.no_grad():
        list(other.parameters())[-1].add_(0.5)  # an LSTM weight: exported and read back exactly
    export_allennlp(other, tmp_path / "o.json", tmp_path / "w.hdf5")
    weights.write_bytes((tmp_path / "w.hdf5").read_bytes())  # a valid file, but not the download
    record_path(weights).unlink()
    capsys.readouterr()
    # the registry knows the published digest: the changed file is refused, not re-recorded
    known = {"tiny": replace(TINY_MODEL, weights_sha256=hashlib.sha256(WEIGHTS).hexdigest())}
    with pytest.raises(ModelFileError, match="is not the published file's"):
        fetch_published("tiny", models=known, transfer=Transfer(**FAST))
    assert not record_path(weights).exists()
    # no digest known: checked as a file placed by hand, and the user told so and what to do
    loaded = load_bilm("tiny", optimize=False)
    err = capsys.readouterr().err
    assert f"{weights}: no record of its download" in err and "delete it to download it again" in err
    assert _same_weights(loaded, other) and server.count(TINY_WEIGHTS_PATH) == 1
    # from then on it is recorded: a later change is caught as for any download
    assert record_path(weights).is_file()


def test_cached_file_changed_since_download_is_fetched_again(server, tmp_path, capsys):
    server.publish_small()
    _, weights = fetch_published("small", transfer=Transfer(**FAST))
    data = bytearray(weights.read_bytes())
    data[len(data) // 2] ^= 0xFF
    weights.write_bytes(bytes(data))
    assert _same_weights(load_bilm("small", optimize=False), load_tiny_bilm())
    assert server.count(WEIGHTS_PATH) == 2 and "changed since it was downloaded" in capsys.readouterr().err


def test_files_placed_by_hand_are_checked_once_and_recorded(monkeypatch, tmp_path, tiny_paths):
    monkeypatch.setenv(BASE_URL_ENV, _closed_port_url())
    monkeypatch.setenv("SPACY_ELMO_CACHE", str(tmp_path / "cache"))
    monkeypatch.setitem(PUBLISHED_MODELS, "tiny", TINY_MODEL)
    folder = tmp_path / "cache" / "tiny"
    folder.mkdir(parents=True)
    shutil.copy(tiny_paths[0], folder / "options.json")
    (folder / "weights.hdf5").write_bytes(WEIGHTS[: len(WEIGHTS) // 2])
    with pytest.raises(ModelFileError, match=r"tiny/weights.hdf5: not a readable HDF5"):
        load_bilm("tiny")
    assert (folder / "weights.hdf5").exists()  # a file placed by hand is refused, not removed
    shutil.copy(tiny_paths[1], folder / "weights.hdf5")
    assert _same_weights(load_bilm("tiny", optimize=False), load_tiny_bilm())
    record = json.loads(record_path(folder / "weights.hdf5").read_text())
    assert record["sha256"] == hashlib.sha256(WEIGHTS).hexdigest()
    assert "the shape 2x64_16_32cnn_1xhighway" in record["checked"] and "by shape only" in record["checked"]
