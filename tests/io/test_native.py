import json
import pickle

import numpy as np
import pytest

from spacy_elmo import load_bilm, save_bilm
from spacy_elmo.io import ModelFileError
from spacy_elmo.io.native import CONFIG_NAME, WEIGHTS_NAME

from ..conftest import random_bilm


def test_round_trip_is_exact(tmp_path, tiny_bilm, tiny_sentences):
    save_bilm(tiny_bilm, tmp_path / "model", extra={"note": "tiny"})
    again = load_bilm(tmp_path / "model", optimize=False)
    for a, b in zip(tiny_bilm.embed(tiny_sentences), again.embed(tiny_sentences)):
        np.testing.assert_array_equal(a, b)
    config = json.loads((tmp_path / "model" / CONFIG_NAME).read_text())
    assert config["extra"] == {"note": "tiny"} and config["options"]["lstm"]["dim"] == 64
    assert not list((tmp_path / "model").glob(".*tmp*"))


def test_load_bilm_runs_the_fast_path_by_default_within_1e5_of_the_plain_one(tmp_path, tiny_bilm, tiny_sentences):
    save_bilm(tiny_bilm, tmp_path / "model")
    fast, plain = load_bilm(tmp_path / "model"), load_bilm(tmp_path / "model", optimize=False)
    assert fast.runner.char_cache is not None
    assert not fast.runner.exact and plain.runner is None
    for a, b in zip(fast.embed(tiny_sentences), plain.embed(tiny_sentences)):
        np.testing.assert_allclose(a, b, atol=1e-5, rtol=0)


def test_bit_flip_is_detected(tmp_path):
    save_bilm(random_bilm(), tmp_path)
    weights = tmp_path / WEIGHTS_NAME
    data = bytearray(weights.read_bytes())
    data[-10] ^= 0x01
    weights.write_bytes(bytes(data))
    with pytest.raises(ModelFileError, match="checksum mismatch") as err:
        load_bilm(tmp_path)
    assert WEIGHTS_NAME in str(err.value)


def test_pickle_in_place_of_weights_is_never_executed(tmp_path):
    save_bilm(random_bilm(), tmp_path)
    marker = tmp_path / "pwned"

    class Payload:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    (tmp_path / WEIGHTS_NAME).write_bytes(pickle.dumps(Payload()))
    config = json.loads((tmp_path / CONFIG_NAME).read_text())
    del config["weights_sha256"]  # even without the checksum, nothing is unpickled
    (tmp_path / CONFIG_NAME).write_text(json.dumps(config))
    with pytest.raises(ModelFileError, match="safetensors"):
        load_bilm(tmp_path)
    assert not marker.exists()


def test_wrong_shapes_and_missing_files(tmp_path):
    save_bilm(random_bilm(dim=24), tmp_path / "a")
    save_bilm(random_bilm(dim=32), tmp_path / "b")
    (tmp_path / "a" / WEIGHTS_NAME).write_bytes((tmp_path / "b" / WEIGHTS_NAME).read_bytes())
    config = json.loads((tmp_path / "a" / CONFIG_NAME).read_text())
    del config["weights_sha256"]
    (tmp_path / "a" / CONFIG_NAME).write_text(json.dumps(config))
    with pytest.raises(ModelFileError, match="shape"):
        load_bilm(tmp_path / "a")
    with pytest.raises(ModelFileError, match="not found"):
        load_bilm(tmp_path / "missing")
    (tmp_path / "b" / CONFIG_NAME).write_text("[]")
    with pytest.raises(ModelFileError, match="not a spacy-elmo"):
        load_bilm(tmp_path / "b")


def test_load_bilm_argument_errors(tmp_path):
    with pytest.raises(ValueError, match="both"):
        load_bilm(options=tmp_path / "o.json")
    with pytest.raises(ValueError, match="not both"):
        load_bilm(tmp_path, options=tmp_path / "o.json", weights=tmp_path / "w")


@pytest.mark.parametrize("value", ["64", 64.5, True])
def test_a_size_in_our_config_that_is_no_whole_number_is_refused_naming_the_config(tmp_path, tiny_bilm, value):
    path = save_bilm(tiny_bilm, tmp_path / "m")
    config = json.loads((path / CONFIG_NAME).read_text())
    config["options"]["lstm"]["dim"] = value
    (path / CONFIG_NAME).write_text(json.dumps(config))
    with pytest.raises(ModelFileError, match=rf"lstm.dim is {value!r}, not a whole number") as err:
        load_bilm(path)
    assert err.value.path == str(path / CONFIG_NAME)
