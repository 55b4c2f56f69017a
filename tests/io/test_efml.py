"""ELMoForManyLangs model directories: ids and layers equal to EFML's own outputs
(tests/data/elmoformanylangs, made by EFML 0.0.4.post2), weights read without running pickled code."""
import json
import pickle
import shutil
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch

from spacy_elmo.io import ModelFileError, load_bilm, load_efml, load_native, save_bilm
from spacy_elmo.io.loading import locate_bilm, resolve_bilm
from spacy_elmo.io.sources import EFMLSource, NativeSource

DATA = Path(__file__).resolve().parent.parent / "data" / "elmoformanylangs"
MODEL = DATA / "model"
SENTENCES = json.loads((DATA / "sentences.json").read_text(encoding="utf-8"))
TOLERANCE = 1e-5
PKL_FILES = ("token_embedder.pkl", "encoder.pkl")


@pytest.fixture(scope="module")
def golden():
    with np.load(DATA / "golden.npz", allow_pickle=False) as data:
        return {key: data[key] for key in data.files}


@pytest.fixture(scope="module")
def efml_bilm():
    return load_efml(MODEL)


@pytest.fixture
def model_copy(tmp_path):
    return Path(shutil.copytree(MODEL, tmp_path / "model"))


def _max_diff(ours, theirs) -> float:
    assert ours.shape == theirs.shape
    return float(np.abs(ours - theirs).max()) if ours.size else 0.0


def _assert_matches_golden(outputs, golden, key="layers"):
    for i, layers in enumerate(outputs):
        assert _max_diff(layers, golden[f"{key}_{i}"]) <= TOLERANCE, f"sentence {i}"


@pytest.mark.parametrize("index", range(len(SENTENCES)))
def test_ids_equal_efml_ids_for_every_sentence(efml_bilm, golden, index):
    ids, lengths = efml_bilm.batch_ids([SENTENCES[index]])
    assert lengths.tolist() == [len(SENTENCES[index]) + 2]
    np.testing.assert_array_equal(ids[0, :, 1:], golden[f"char_ids_{index}"])
    np.testing.assert_array_equal(ids[0, :, 0], golden[f"word_ids_{index}"])


def test_layers_match_efml_for_every_sentence_with_and_without_boundaries(efml_bilm, golden):
    _assert_matches_golden(efml_bilm.embed(SENTENCES), golden)
    _assert_matches_golden(efml_bilm.embed(SENTENCES, boundaries=True), golden, key="full")


def test_empty_sentence_gives_no_tokens_of_every_layer(efml_bilm):
    assert efml_bilm.embed([[]])[0].shape == (3, 0, 32)


@pytest.mark.parametrize("optimize", [False, True])
def test_load_bilm_reads_an_efml_directory_and_matches_efml(golden, optimize):
    assert locate_bilm(MODEL) == EFMLSource(MODEL)
    bilm = load_bilm(MODEL, optimize=optimize)
    _assert_matches_golden(bilm.embed(SENTENCES), golden)
    _assert_matches_golden(bilm.embed(SENTENCES), golden)  # again, with the char-CNN cache warm


def test_results_are_stateless_and_do_not_depend_on_the_batch(efml_bilm, golden):
    first = efml_bilm.embed(SENTENCES)
    # EFML's stateful encoder gives other vectors the second time (golden stateful_i); ours does not
    for i, layers in enumerate(efml_bilm.embed(SENTENCES)):
        np.testing.assert_array_equal(layers, first[i])
    assert any(_max_diff(first[i], golden[f"stateful_{i}"]) > 1e-2 for i in range(len(SENTENCES)))
    _assert_matches_golden(efml_bilm.embed(SENTENCES, batch_size=4), golden)
    _assert_matches_golden([efml_bilm.embed([s])[0] for s in SENTENCES], golden)


def test_the_fixture_is_legacy_format_and_the_zip_format_reads_the_same(model_copy, golden):
    assert not any(zipfile.is_zipfile(MODEL / name) for name in PKL_FILES)
    for name in PKL_FILES:
        state = torch.load(MODEL / name, weights_only=True, map_location="cpu")
        torch.save(state, model_copy / name)  # torch >= 1.6 writes the zip format
        assert zipfile.is_zipfile(model_copy / name)
    _assert_matches_golden(load_efml(model_copy).embed(SENTENCES), golden)


class _WritesMarker:
    """Unpickling this opens (creates) the marker file: what a payload that runs code would do."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (open, (str(self.marker), "w"))


def _payloads(marker: Path):
    """Ways to put the payload in a .pkl: plain pickle, and inside a state dict saved by torch in
    the legacy and the zip format."""
    state = {"projection.weight": torch.zeros(2, 2), "projection.bias": _WritesMarker(marker)}
    yield "pickle", lambda path: path.write_bytes(pickle.dumps(_WritesMarker(marker), protocol=2))
    yield "legacy", lambda path: torch.save(state, path, _use_new_zipfile_serialization=False)
    yield "zip", lambda path: torch.save(state, path)


@pytest.mark.parametrize("name", PKL_FILES)
def test_a_pickle_payload_is_refused_naming_the_file_and_never_runs(model_copy, tmp_path, name):
    marker = tmp_path / "payload-ran"
    for kind, write in _payloads(marker):
        write(model_copy / name)
        with pytest.raises(ModelFileError, match="refused") as error:
            load_efml(model_copy)
        assert error.value.path == str(model_copy / name), kind
        with pytest.raises(ModelFileError, match="refused"):
            load_bilm(model_copy)
        assert not marker.exists(), f"the {kind} payload ran"


@pytest.mark.parametrize("name", [*PKL_FILES, "char.dic", "word.dic", "cnn_16_8_16_32_sample.json"])
def test_a_missing_file_is_an_error_naming_it(model_copy, name):
    (model_copy / name).unlink()
    with pytest.raises(ModelFileError, match="missing") as error:
        resolve_bilm(model_copy)
    assert name in str(error.value)


def test_the_architecture_json_is_found_by_its_name_when_config_path_is_a_training_machine_path(
    model_copy, golden, capfd
):
    config = json.loads((model_copy / "config.json").read_text())
    config["config_path"] = "/home/trainer/ELMoForManyLangs/configs/cnn_16_8_16_32_sample.json"
    (model_copy / "config.json").write_text(json.dumps(config))
    _assert_matches_golden(load_efml(model_copy).embed(SENTENCES[:3]), golden)
    assert capfd.readouterr().err == ""  # read from the folder: nothing to say
    # without it, the published values where no shape tells (proj_clip 3, not this model's 1), said so
    (model_copy / "cnn_16_8_16_32_sample.json").unlink()
    bilm = load_efml(model_copy)
    expected = json.loads((DATA / "golden.json").read_text(encoding="utf-8"))["model_config"]
    assert (bilm.config.dim, bilm.config.projection_dim, bilm.config.char_embedding_dim) == (
        expected["encoder"]["dim"], expected["encoder"]["projection_dim"], expected["token_embedder"]["char_dim"])
    assert (bilm.config.cell_clip, bilm.config.proj_clip) == (3.0, 3.0)
    line = capfd.readouterr().err
    assert "proj_clip 3" in line and "names a file outside the model and was not read" in line
    assert "may not be this model's" in line  # cnn_16_8_16_32_sample.json is not the published name


def test_a_damaged_pkl_and_a_malformed_dic_line_are_errors_naming_the_file(model_copy):
    data = (model_copy / "encoder.pkl").read_bytes()
    (model_copy / "encoder.pkl").write_bytes(data[: len(data) // 2])
    with pytest.raises(ModelFileError) as error:
        load_efml(model_copy)
    assert error.value.path == str(model_copy / "encoder.pkl")
    shutil.copy(MODEL / "encoder.pkl", model_copy / "encoder.pkl")
    with open(model_copy / "char.dic", "a", encoding="utf-8") as handle:
        handle.write("x\ty\tz\n")
    with pytest.raises(ModelFileError, match="line 120") as error:
        load_efml(model_copy)
    assert error.value.path == str(model_copy / "char.dic")


def test_weights_that_do_not_fit_the_architecture_are_refused(model_copy):
    state = torch.load(MODEL / "token_embedder.pkl", weights_only=True)
    state["extra.weight"] = torch.zeros(1)
    torch.save(state, model_copy / "token_embedder.pkl")
    with pytest.raises(ModelFileError, match="unexpected tensors"):
        load_efml(model_copy)
    del state["extra.weight"], state["projection.bias"]
    torch.save(state, model_copy / "token_embedder.pkl")
    with pytest.raises(ModelFileError, match="projection.bias"):
        load_efml(model_copy)


def test_byte_ids_given_to_an_efml_model_are_refused(efml_bilm):
    from spacy_elmo.bilm import batch_char_ids

    ids, lengths = batch_char_ids([["a", "b"]])
    with pytest.raises(ValueError, match="batch_ids"):
        efml_bilm(torch.from_numpy(ids), torch.from_numpy(lengths))


def test_our_directory_keeps_the_character_vocabulary(efml_bilm, tmp_path, golden):
    save_bilm(efml_bilm, tmp_path / "ours")
    assert locate_bilm(tmp_path / "ours") == NativeSource(tmp_path / "ours")
    _assert_matches_golden(load_native(tmp_path / "ours").embed(SENTENCES), golden)


def test_export_to_the_allennlp_format_refuses_a_learned_vocabulary(efml_bilm, tmp_path):
    from spacy_elmo.io import export_allennlp

    with pytest.raises(ValueError, match="cannot hold"):
        export_allennlp(efml_bilm, tmp_path / "options.json", tmp_path / "weights.hdf5")
    assert not (tmp_path / "weights.hdf5").exists() and not (tmp_path / "options.json").exists()


def test_export_efml_writes_what_load_efml_reads_back_bitwise(efml_bilm, golden, tmp_path):
    from spacy_elmo.io.efml import export_efml

    out = export_efml(efml_bilm, tmp_path / "exported")
    assert sorted(p.name for p in out.iterdir()) == sorted(
        ["config.json", "char.dic", "word.dic", "token_embedder.pkl", "encoder.pkl", "cnn_16_16_32_2.json"]
    )
    again = load_efml(out)  # tensors-only reads, as for EFML's own files
    for name, value in efml_bilm.state_dict().items():
        assert torch.equal(value, again.state_dict()[name]), name
    assert again.char_vocab.to_json() == efml_bilm.char_vocab.to_json()
    _assert_matches_golden(again.embed(SENTENCES), golden)
    # the original files and the exported ones hold the same tensors under the same names
    for name in PKL_FILES:
        original = torch.load(MODEL / name, weights_only=True)
        exported = torch.load(out / name, weights_only=True)
        assert sorted(original) == sorted(exported), name
        assert all(torch.equal(original[k].float(), exported[k]) for k in original), name


def test_export_efml_refuses_a_byte_id_model(tmp_path):
    from spacy_elmo.io.efml import export_efml

    from ..conftest import load_tiny_bilm

    with pytest.raises(ValueError, match="export_allennlp"):
        export_efml(load_tiny_bilm(), tmp_path / "x")
