"""Files placed by hand in the download cache are checked against what the registry knows of their
name (io/published_shape.py) before their digest is recorded as trusted."""
import hashlib
import json
import shutil
from dataclasses import replace

import h5py
import pytest

from spacy_elmo import load_bilm
from spacy_elmo.bilm.config import SMALL as SMALL_CONFIG
from spacy_elmo.io import ModelFileError
from spacy_elmo.io.download import fetch_published, record_path
from spacy_elmo.io.published_shape import PublishedShape
from spacy_elmo.io.registry import BASE_URL_ENV, PUBLISHED_MODELS

from .test_download import OPTIONS, SMALL, TINY_MODEL, WEIGHTS, _closed_port_url


@pytest.fixture()
def cache(monkeypatch, tmp_path):
    """A cache in the test's directory, and a registry whose server cannot be reached: what is
    used comes from the files placed there."""
    monkeypatch.setenv(BASE_URL_ENV, _closed_port_url())
    monkeypatch.setenv("SPACY_ELMO_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _place(folder, options=OPTIONS, weights=WEIGHTS):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "options.json").write_bytes(options)
    (folder / "weights.hdf5").write_bytes(weights)
    return folder / "options.json", folder / "weights.hdf5"


def _records(folder):
    return sorted(path.name for path in folder.glob("*.sha256.json"))


def test_a_narrow_model_placed_as_small_is_refused_at_first_use_and_not_recorded(cache):
    options, weights = _place(cache / "small")
    with pytest.raises(ModelFileError) as error:
        load_bilm("small")
    message = str(error.value)
    assert "\n" not in message and message.startswith(f"{options}: placed by hand as `small`")
    assert "lstm.dim 64 (published 1024)" in message and "lstm.projection_dim 16 (published 128)" in message
    assert "char_cnn filters 32 (published 2048)" in message
    assert _records(cache / "small") == [] and weights.read_bytes() == WEIGHTS  # refused, not removed
    # options of the published shape beside the narrow weights: the weights' datasets give them away
    options.write_text(json.dumps(SMALL_CONFIG.to_options()), encoding="utf-8")
    with pytest.raises(ModelFileError) as error:
        load_bilm("small")
    message = str(error.value)
    assert "\n" not in message and message.startswith(f"{weights}: placed by hand as `small`")
    assert "shape (32, 16) at 'CNN_proj/W_proj' where that shape has (2048, 128)" in message
    assert _records(cache / "small") == ["options.json.sha256.json"]  # the options fit; the weights' digest is not recorded


def test_options_declaring_a_huge_model_placed_by_hand_are_refused_before_anything_is_built(cache):
    huge = json.loads(OPTIONS)
    huge["lstm"]["dim"] = 4_000_000  # built, this biLM would need gigabytes
    _place(cache / "small", options=json.dumps(huge).encode())
    with pytest.raises(ModelFileError, match=r"lstm.dim 4000000 \(published 1024\)"):
        load_bilm("small")
    assert _records(cache / "small") == []


def test_weights_with_a_layer_more_than_the_published_shape_are_refused(cache, tmp_path):
    one_layer = replace(TINY_MODEL, shape="1x64_16_32cnn_1xhighway")
    options = json.loads(OPTIONS)
    options["lstm"]["n_layers"] = 1
    _place(cache / "tiny", options=json.dumps(options).encode())
    with pytest.raises(ModelFileError, match=r"holds 'RNN_0/RNN/MultiRNNCell/Cell1/LSTMCell', a layer more"):
        fetch_published("tiny", models={"tiny": one_layer})
    assert _records(cache / "tiny") == ["options.json.sha256.json"]


def test_a_weights_file_of_the_right_shape_but_not_the_published_size_is_refused(cache):
    _place(cache / "tiny")
    larger = {"tiny": replace(TINY_MODEL, size_mb=5.0)}
    with pytest.raises(ModelFileError, match=rf"holds {len(WEIGHTS):,} bytes where the published file holds about 5.0 MB"):
        fetch_published("tiny", models=larger)
    assert _records(cache / "tiny") == ["options.json.sha256.json"]


def test_a_dataset_reached_through_a_link_counts_as_missing(cache, tmp_path):
    _, weights = _place(cache / "tiny")
    with h5py.File(weights, "r+") as handle:
        handle.move("CNN_proj/W_proj", "CNN_proj/W_elsewhere")
        handle["CNN_proj/W_proj"] = h5py.SoftLink("/CNN_proj/W_elsewhere")
    with pytest.raises(ModelFileError, match=r"no dataset at 'CNN_proj/W_proj'"):
        fetch_published("tiny", models={"tiny": TINY_MODEL})


def test_the_record_says_what_a_placed_file_was_checked_against(cache):
    _, weights = _place(cache / "tiny")
    known = {"tiny": replace(TINY_MODEL, weights_sha256=hashlib.sha256(WEIGHTS).hexdigest())}
    fetch_published("tiny", models=known)
    checked = json.loads(record_path(weights).read_text())["checked"]
    assert checked.startswith("placed by hand") and "the shape 2x64_16_32cnn_1xhighway" in checked
    assert "the published SHA-256" in checked and "by shape only" not in checked
    # without a published digest the record says the shape was all there was to compare
    shutil.rmtree(cache / "tiny")
    options, _ = _place(cache / "tiny")
    fetch_published("tiny", models={"tiny": TINY_MODEL})
    assert "by shape only" in json.loads(record_path(options).read_text())["checked"]


def test_every_published_name_is_a_shape_the_check_reads():
    for model in PUBLISHED_MODELS.values():
        shape = PublishedShape.parse(model.shape)
        assert (shape.n_layers, shape.n_filters) == (2, 2048), model.name
    assert PublishedShape.parse(SMALL.shape) == PublishedShape(2, 1024, 128, 2048, 1)
    with pytest.raises(ValueError, match="not an AllenNLP shape name"):
        PublishedShape.parse("elmo_small")
