import json
import shutil

import h5py
import numpy as np
import pytest

from spacy_elmo import load_bilm
from spacy_elmo.io import ModelFileError, export_allennlp, load_allennlp

from ..conftest import random_bilm

PUBLISHED_NAMES = {
    "char_embed",
    "CNN/W_cnn_0",
    "CNN/b_cnn_0",
    "CNN_high_0/W_carry",
    "CNN_high_0/W_transform",
    "CNN_high_0/b_carry",
    "CNN_high_0/b_transform",
    "CNN_proj/W_proj",
    "CNN_proj/b_proj",
    "RNN_0/RNN/MultiRNNCell/Cell0/LSTMCell/W_0",
    "RNN_0/RNN/MultiRNNCell/Cell0/LSTMCell/B",
    "RNN_0/RNN/MultiRNNCell/Cell0/LSTMCell/W_P_0",
    "RNN_1/RNN/MultiRNNCell/Cell1/LSTMCell/W_0",
}


def _datasets(path):
    found = {}

    def visit(name, obj):
        if isinstance(obj, h5py.Dataset):
            found[name] = (obj.shape, obj.dtype)

    with h5py.File(path, "r") as handle:
        handle.visititems(visit)
    return found


def test_export_reproduces_the_published_file_exactly(tiny_bilm, tiny_paths, tmp_path):
    export_allennlp(tiny_bilm, tmp_path / "options.json", tmp_path / "weights.hdf5")
    original, exported = _datasets(tiny_paths[1]), _datasets(tmp_path / "weights.hdf5")
    assert original == exported
    with h5py.File(tiny_paths[1], "r") as a, h5py.File(tmp_path / "weights.hdf5", "r") as b:
        for name in original:
            # forget bias +1 and highway/gate conventions undone exactly on the way out
            np.testing.assert_allclose(a[name][...], b[name][...], atol=1e-6, err_msg=name)
    assert json.loads((tmp_path / "options.json").read_text()) == json.loads(tiny_paths[0].read_text())


def test_export_then_import_gives_the_same_outputs(tmp_path, tiny_sentences):
    bilm = random_bilm(seed=1, n_highway=2)
    export_allennlp(bilm, tmp_path / "o.json", tmp_path / "w.hdf5")
    names = set(_datasets(tmp_path / "w.hdf5"))
    assert PUBLISHED_NAMES <= names
    assert _datasets(tmp_path / "w.hdf5")["char_embed"] == ((261, 4), np.dtype("float32"))
    again = load_bilm(options=tmp_path / "o.json", weights=tmp_path / "w.hdf5")
    # Only the forget bias's -1/+1 round trip rounds (about 1e-8).
    for a, b in zip(bilm.embed(tiny_sentences), again.embed(tiny_sentences)):
        np.testing.assert_allclose(a, b, atol=1e-6)


def test_forget_bias_is_added_on_import(tiny_bilm, tiny_paths):
    with h5py.File(tiny_paths[1], "r") as handle:
        stored = handle["RNN_0/RNN/MultiRNNCell/Cell0/LSTMCell/B"][...]
    bias = tiny_bilm.forward_lstm.layers[0].input_linearity.bias.detach().numpy()
    np.testing.assert_allclose(bias[128:192], stored[128:192] + 1.0)
    np.testing.assert_allclose(bias[:128], stored[:128])


def test_missing_files_name_the_file(tmp_path, tiny_paths):
    with pytest.raises(ModelFileError, match="nope.json"):
        load_allennlp(tmp_path / "nope.json", tiny_paths[1])
    with pytest.raises(ModelFileError, match="nope.hdf5"):
        load_allennlp(tiny_paths[0], tmp_path / "nope.hdf5")


def test_truncated_hdf5_is_refused(tmp_path, tiny_paths):
    data = tiny_paths[1].read_bytes()
    broken = tmp_path / "w.hdf5"
    broken.write_bytes(data[: len(data) // 2])
    with pytest.raises(ModelFileError, match="w.hdf5"):
        load_allennlp(tiny_paths[0], broken)


def test_options_that_do_not_match_weights(tmp_path, tiny_paths):
    options = json.loads(tiny_paths[0].read_text())
    options["lstm"]["dim"] = 128
    path = tmp_path / "options.json"
    path.write_text(json.dumps(options))
    with pytest.raises(ModelFileError, match="do not match") as err:
        load_allennlp(path, tiny_paths[1])
    assert "weights.hdf5" in str(err.value)


def test_malformed_options(tmp_path, tiny_paths):
    path = tmp_path / "options.json"
    path.write_text("{not json")
    with pytest.raises(ModelFileError, match="options.json"):
        load_allennlp(path, tiny_paths[1])
    path.write_text(json.dumps({"lstm": {}}))
    with pytest.raises(ModelFileError, match="missing or have a malformed field"):
        load_allennlp(path, tiny_paths[1])


def test_missing_dataset_and_wrong_dtype(tmp_path, tiny_paths):
    weights = tmp_path / "w.hdf5"
    shutil.copy(tiny_paths[1], weights)
    with h5py.File(weights, "a") as handle:
        del handle["CNN_proj/b_proj"]
    with pytest.raises(ModelFileError, match="CNN_proj/b_proj"):
        load_allennlp(tiny_paths[0], weights)
    shutil.copy(tiny_paths[1], weights)
    with h5py.File(weights, "a") as handle:
        del handle["CNN_proj/b_proj"]
        handle["CNN_proj/b_proj"] = np.zeros(16, dtype=np.int32)
    with pytest.raises(ModelFileError, match="dtype"):
        load_allennlp(tiny_paths[0], weights)
