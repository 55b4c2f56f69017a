import hashlib
import json

import numpy as np
import pytest
import torch

from spacy_elmo.bilm import VectorSetting
from spacy_elmo.io import ModelFileError, bilm_to_bytes, load_native, save_bilm
from spacy_elmo.io.vector_file import VECTORS_NAME, setting_from_json, setting_to_json


def _setting(bilm, *, means=True, sha=None):
    config = bilm.config
    layer_means = np.linspace(-1, 1, config.n_output_layers * config.output_dim).reshape(config.n_output_layers, -1)
    return VectorSetting(
        layer_weights=(0.0,) + (1.0 / (config.n_output_layers - 1),) * (config.n_output_layers - 1),
        layer_means=layer_means if means else None,
        weights_sha256=sha or hashlib.sha256(bilm_to_bytes(bilm)).hexdigest(),
        provenance={"record": "results/x.json"},
    )


@pytest.mark.parametrize("means", [True, False])
def test_setting_travels_with_its_weights(tiny_bilm, tmp_path, means):
    tiny_bilm.vector_setting = _setting(tiny_bilm, means=means)
    save_bilm(tiny_bilm, tmp_path / "m")
    assert (tmp_path / "m" / VECTORS_NAME).is_file()
    loaded = load_native(tmp_path / "m").vector_setting
    assert loaded.layer_weights == tiny_bilm.vector_setting.layer_weights
    assert loaded.provenance == {"record": "results/x.json"}
    if means:
        np.testing.assert_array_equal(loaded.layer_means, tiny_bilm.vector_setting.layer_means)
    else:
        assert loaded.layer_means is None


def test_a_model_without_the_file_has_no_setting(tiny_bilm, tmp_path):
    save_bilm(tiny_bilm, tmp_path / "m")
    assert not (tmp_path / "m" / VECTORS_NAME).exists()
    assert load_native(tmp_path / "m").vector_setting is None


def test_changed_weights_leave_the_setting_out_and_say_so_once(tiny_bilm, tmp_path):
    tiny_bilm.vector_setting = _setting(tiny_bilm)
    save_bilm(tiny_bilm, tmp_path / "m")
    with torch.no_grad():  # as a fine-tuning step would
        next(tiny_bilm.parameters()).add_(0.5)
    with pytest.warns(UserWarning, match="mean of the layers"):
        save_bilm(tiny_bilm, tmp_path / "m")  # the stale file goes too
    assert tiny_bilm.vector_setting is None
    assert not (tmp_path / "m" / VECTORS_NAME).exists()
    assert load_native(tmp_path / "m").vector_setting is None


def test_a_file_for_other_weights_is_refused_naming_it(tiny_bilm, tmp_path):
    save_bilm(tiny_bilm, tmp_path / "m")
    data = setting_to_json(_setting(tiny_bilm, sha="0" * 64))
    (tmp_path / "m" / VECTORS_NAME).write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(ModelFileError, match=r"vectors\.json: made for weights .* delete it"):
        load_native(tmp_path / "m")


@pytest.mark.parametrize(
    "change, message",
    [
        ({"format": "other"}, "not a spacy-elmo vectors file"),
        ({"format_version": 99}, "newer spacy-elmo"),
        ({"layer_weights": [0.5, 0.5, 0.5]}, "non-negative and sum to 1"),
        ({"layer_weights": [1.0, 0.0]}, "expected"),
        ({"layer_means": [[0.0, "x"]]}, "bad vector setting"),
        ({"layer_means": [[float("nan")] * 32] * 3}, "NaN"),
    ],
)
def test_bad_files_name_the_file_and_the_fault(tiny_bilm, tmp_path, change, message):
    save_bilm(tiny_bilm, tmp_path / "m")
    data = {**setting_to_json(_setting(tiny_bilm)), **change}
    path = tmp_path / "m" / VECTORS_NAME
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(ModelFileError, match=message) as err:
        load_native(tmp_path / "m")
    assert err.value.path == str(path)


def test_width_must_match_the_biLM(tiny_bilm, tmp_path):
    save_bilm(tiny_bilm, tmp_path / "m")
    data = setting_to_json(_setting(tiny_bilm))
    data["layer_means"] = [row[:-1] for row in data["layer_means"]]
    (tmp_path / "m" / VECTORS_NAME).write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(ModelFileError, match="the biLM has 3 of width"):
        load_native(tmp_path / "m")


def test_pre_softmax_weights_leave_zero_layers_out(tiny_bilm):
    setting = setting_from_json(setting_to_json(_setting(tiny_bilm)), source="x")
    weights = np.exp(np.array(setting.pre_softmax()))
    np.testing.assert_allclose(weights / weights.sum(), setting.layer_weights)
    assert weights[0] == 0.0
