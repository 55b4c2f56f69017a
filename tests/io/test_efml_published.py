"""ELMoForManyLangs zips as they are published: no architecture JSON, a ``config_path`` outside the
zip (the authors' absolute path, or ``../configs/...``), files at the top of the zip. The
architecture is the published one checked against the weights' shapes (and taken from them where
they disagree); the zips in tests/data/elmoformanylangs/published/ were made by EFML's own code
(lab/fixtures/make_efml_published_fixtures.py), its outputs beside them."""
import json
import shutil
import zipfile
from pathlib import Path

import numpy as np
import pytest

from spacy_elmo.io import ModelFileError, load_bilm, load_efml
from spacy_elmo.io.archive import archive_contents, load_archive
from spacy_elmo.io.efml_architecture import (
    PUBLISHED_ARCHITECTURE,
    architecture_from_shapes,
    describe,
    shape_values,
)
from spacy_elmo.io.loading import locate_bilm
from spacy_elmo.io.sources import EFMLSource

DATA = Path(__file__).resolve().parent.parent / "data" / "elmoformanylangs"
PUBLISHED = DATA / "published"
INDEX = json.loads((PUBLISHED / "index.json").read_text(encoding="utf-8"))
SENTENCES = json.loads((DATA / "sentences.json").read_text(encoding="utf-8"))
ZIPS = sorted(INDEX["zips"])
TOLERANCE = 1e-5


def _golden(name):
    with np.load(PUBLISHED / f"{name}.npz", allow_pickle=False) as data:
        return {key: data[key] for key in data.files}


def _assert_matches_efml(bilm, golden):
    for i, layers in enumerate(bilm.embed(SENTENCES)):
        expected = golden[f"layers_{i}"]
        assert layers.shape == expected.shape, f"sentence {i}"
        assert layers.size == 0 or float(np.abs(layers - expected).max()) <= TOLERANCE, f"sentence {i}"
    for i, sentence in enumerate(SENTENCES):
        ids, _ = bilm.batch_ids([sentence])
        np.testing.assert_array_equal(ids[0, :, 1:], golden[f"char_ids_{i}"])
        np.testing.assert_array_equal(ids[0, :, 0], golden[f"word_ids_{i}"])


def _unpack(name, target: Path) -> Path:
    with zipfile.ZipFile(PUBLISHED / f"{name}.zip") as archive:
        archive.extractall(target)
    return target


def _published_shapes(**changes):
    """The tensors' shapes a model of the published architecture has (no tensor is made)."""
    te, enc = dict(PUBLISHED_ARCHITECTURE["token_embedder"]), dict(PUBLISHED_ARCHITECTURE["encoder"])
    te.update({k: v for k, v in changes.items() if k in te})
    enc.update({k: v for k, v in changes.items() if k in enc})
    n_filters = sum(n for _, n in te["filters"])
    embedder = {"char_emb_layer.embedding.weight": (300, te["char_dim"]),
                "word_emb_layer.embedding.weight": (150000, te["word_dim"]),
                "projection.weight": (enc["projection_dim"], te["word_dim"] + n_filters),
                "projection.bias": (enc["projection_dim"],)}
    for i, (width, number) in enumerate(te["filters"]):
        embedder[f"convolutions.{i}.weight"] = (number, te["char_dim"], width)
    for k in range(te["n_highway"]):
        embedder[f"highways._layers.{k}.weight"] = (2 * n_filters, n_filters)
    encoder = {}
    for direction in ("forward", "backward"):
        for layer in range(enc["n_layers"]):
            encoder[f"{direction}_layer_{layer}.input_linearity.weight"] = (4 * enc["dim"], enc["projection_dim"])
            encoder[f"{direction}_layer_{layer}.state_projection.weight"] = (enc["projection_dim"], enc["dim"])
    return embedder, encoder


def test_the_fixtures_have_the_published_layout():
    for name in ZIPS:
        members = zipfile.ZipFile(PUBLISHED / f"{name}.zip").namelist()
        assert members == INDEX["zips"][name]["members"]
        # at the top of the zip, no folder; no architecture JSON; config_path outside the zip
        assert all("/" not in m for m in members) and not [m for m in members if m.startswith("cnn_")]
        assert {"config.json", "char.dic", "word.dic", "encoder.pkl", "token_embedder.pkl"} <= set(members)
        config = json.loads(zipfile.ZipFile(PUBLISHED / f"{name}.zip").read("config.json"))
        assert config["config_path"] == INDEX["zips"][name]["config_path"]
        assert config["config_path"].startswith(("/", "../"))
    assert {"meta.json" in zipfile.ZipFile(PUBLISHED / f"{n}.zip").namelist() for n in ZIPS} == {True, False}


@pytest.mark.parametrize("name", ZIPS)
def test_a_published_zip_loads_and_gives_efmls_layers_and_ids(name, capfd):
    path = PUBLISHED / f"{name}.zip"
    bilm = load_bilm(path, optimize=False)
    _assert_matches_efml(bilm, _golden(name))
    line = capfd.readouterr().err.strip().splitlines()
    config_path = INDEX["zips"][name]["config_path"]
    assert len(line) == 1 and line[0].startswith(f"{path}: architecture: cnn_50_100_512_4096_sample's")
    assert f"config_path {config_path!r} names a file outside the model and was not read" in line[0]
    assert "cell_clip 3, proj_clip 3, activation relu, max_characters_per_token 50 are the published" in line[0]
    # what differs from the published widths is named, with the values the shapes gave
    expected = INDEX["zips"][name]["model_config"]
    assert f"dim {expected['encoder']['dim']}" in line[0] and "projection_dim" in line[0]
    config = bilm.config
    assert (config.dim, config.projection_dim, config.n_layers) == tuple(
        expected["encoder"][k] for k in ("dim", "projection_dim", "n_layers"))
    assert [list(f) for f in config.filters] == expected["token_embedder"]["filters"]
    assert config.n_highway == expected["token_embedder"]["n_highway"]
    assert bilm.char_vocab.word_dim == expected["token_embedder"]["word_dim"]
    _assert_matches_efml(load_bilm(path), _golden(name))  # the inference fast path too


def test_the_zip_is_located_with_the_language_its_meta_json_records():
    with_meta = [n for n in ZIPS if "meta.json" in INDEX["zips"][n]["members"]][0]
    without = [n for n in ZIPS if n != with_meta][0]
    assert locate_bilm(PUBLISHED / f"{with_meta}.zip") == EFMLSource(PUBLISHED / f"{with_meta}.zip",
                                                                     language="de")
    assert locate_bilm(PUBLISHED / f"{without}.zip").language is None
    assert archive_contents(PUBLISHED / f"{without}.zip").family == "elmoformanylangs"


def test_a_zip_unpacked_by_hand_keeps_the_language_of_its_meta_json(tmp_path):
    with_meta = [n for n in ZIPS if "meta.json" in INDEX["zips"][n]["members"]][0]
    folder = _unpack(with_meta, tmp_path / "de.model")
    assert locate_bilm(folder) == EFMLSource(folder, language="de")
    (folder / "meta.json").write_text("{damaged", encoding="utf-8")
    assert locate_bilm(folder).language is None
    (folder / "meta.json").unlink()
    assert locate_bilm(folder).language is None


@pytest.mark.parametrize("name", ZIPS)
def test_a_config_path_outside_the_model_is_never_read(name, tmp_path, capfd):
    """Files where config_path points (outside the folder, or linked from inside it) hold
    architectures that would give other vectors: none of them is read."""
    model = _unpack(name, tmp_path / "zone" / "model")
    poisoned = {"encoder": {**PUBLISHED_ARCHITECTURE["encoder"], "cell_clip": 0.001, "proj_clip": 0.001},
                "token_embedder": {**PUBLISHED_ARCHITECTURE["token_embedder"], "activation": "tanh"}}
    relative = tmp_path / "zone" / "configs" / "cnn_50_100_512_4096_sample.json"
    absolute = tmp_path / "elsewhere" / "cnn_50_100_512_4096_sample.json"
    for path in (relative, absolute):
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps(poisoned))
    config = json.loads((model / "config.json").read_text())
    for config_path in ("../configs/cnn_50_100_512_4096_sample.json", str(absolute),
                        "sub/../../configs/cnn_50_100_512_4096_sample.json"):
        (model / "config.json").write_text(json.dumps({**config, "config_path": config_path}))
        _assert_matches_efml(load_efml(model), _golden(name))
        assert "was not read" in capfd.readouterr().err
    # a link inside the folder to the file outside it is outside too
    (model / "cnn_50_100_512_4096_sample.json").symlink_to(absolute)
    (model / "config.json").write_text(json.dumps({**config, "config_path": "cnn_50_100_512_4096_sample.json"}))
    _assert_matches_efml(load_efml(model), _golden(name))
    assert "is not in the model folder" in capfd.readouterr().err


def test_an_architecture_json_in_the_folder_is_used_and_nothing_is_printed(tmp_path, capfd):
    name = ZIPS[0]
    model = _unpack(name, tmp_path / "model")
    architecture = INDEX["zips"][name]["model_config"]
    # read, not inferred: a clip no shape tells is taken from the file
    (model / "cnn_50_100_512_4096_sample.json").write_text(json.dumps(architecture))
    _assert_matches_efml(load_efml(model), _golden(name))
    assert capfd.readouterr().err == ""
    changed = {**architecture, "encoder": {**architecture["encoder"], "proj_clip": 0.5}}
    (model / "cnn_50_100_512_4096_sample.json").write_text(json.dumps(changed))
    assert load_efml(model).config.proj_clip == 0.5


def test_published_values_are_used_where_the_shapes_agree():
    embedder, encoder = _published_shapes()
    architecture, inferred = architecture_from_shapes(embedder, encoder, path=Path("m"))
    assert inferred == {} and architecture == PUBLISHED_ARCHITECTURE
    line = describe("/Users/x/cnn_50_100_512_4096_sample.json", outside=True, inferred=inferred)
    assert line.startswith("architecture: cnn_50_100_512_4096_sample's published values, checked against the "
                           "weights' shapes;")
    assert "names a file outside the model and was not read" in line and "may not be" not in line


def test_shapes_that_disagree_with_the_published_values_are_taken_from_the_shapes():
    embedder, encoder = _published_shapes(n_highway=1, dim=2048, n_layers=3, word_dim=0,
                                          filters=[[1, 32], [2, 64]])
    del embedder["word_emb_layer.embedding.weight"]
    architecture, inferred = architecture_from_shapes(embedder, encoder, path=Path("m"))
    assert inferred == {"token_embedder.word_dim": 0, "token_embedder.filters": [[1, 32], [2, 64]],
                        "token_embedder.n_highway": 1, "encoder.dim": 2048, "encoder.n_layers": 3}
    assert architecture["encoder"]["cell_clip"] == 3 and architecture["token_embedder"]["char_dim"] == 50
    line = describe("../configs/my_model.json", outside=True, inferred=inferred)
    assert "except what the weights' shapes say otherwise (word_dim 0, filters [[1, 32], [2, 64]], n_highway 1, " \
           "dim 2048, n_layers 3)" in line
    assert "it is not cnn_50_100_512_4096_sample.json: the values no shape tells may not be this model's" in line


@pytest.mark.parametrize("change, message", [
    (lambda e, n: e.update({"projection.weight": (512, 999)}), "word_dim \\+ filters = 2148"),
    (lambda e, n: e.update({"convolutions.1.weight": (32, 16, 2)}), "char_dim 50"),
    (lambda e, n: e.update({"char_lstm.weight_ih_l0": (200, 50)}), "character LSTM"),
    (lambda e, n: e.pop("char_emb_layer.embedding.weight"), "words only"),
    (lambda e, n: n.update({"forward_layer_0.input_linearity.weight": (4 * 4096, 256)}), "projection_dim 512"),
    (lambda e, n: n.clear(), "not EFML's 'elmo' encoder"),
])
def test_shapes_that_contradict_each_other_are_refused_naming_the_file(change, message):
    embedder, encoder = _published_shapes()
    change(embedder, encoder)
    with pytest.raises(ModelFileError, match=message) as error:
        shape_values(embedder, encoder, path=Path("model"))
    assert error.value.path.endswith((".pkl",))


def test_a_missing_json_of_the_models_own_folder_is_an_error_not_a_guess(tmp_path):
    model = _unpack(ZIPS[0], tmp_path / "model")
    config = json.loads((model / "config.json").read_text())
    (model / "config.json").write_text(json.dumps({**config, "config_path": "my_architecture.json"}))
    with pytest.raises(ModelFileError, match="my_architecture.json.*put the model's own file back") as error:
        load_efml(model)
    assert error.value.path == str(model / "config.json")
    # the name EFML's README tells users to write, without the file: EFML's packaged values
    (model / "config.json").write_text(json.dumps({**config, "config_path": "cnn_50_100_512_4096_sample.json"}))
    _assert_matches_efml(load_efml(model), _golden(ZIPS[0]))


def test_errors_inside_a_zip_name_the_zip_and_the_member(tmp_path):
    source = PUBLISHED / f"{ZIPS[0]}.zip"
    damaged = tmp_path / "142.zip"
    with zipfile.ZipFile(source) as original, zipfile.ZipFile(damaged, "w") as out:
        for name in original.namelist():
            data = original.read(name)
            out.writestr(name, data[: len(data) // 2] if name == "encoder.pkl" else data)
    with pytest.raises(ModelFileError, match="encoder.pkl: not a readable torch state dict") as error:
        load_archive(damaged)
    assert error.value.path == str(damaged)
    twice = tmp_path / "twice.zip"
    shutil.copy(source, twice)
    with zipfile.ZipFile(twice, "a") as out:
        out.writestr("other/encoder.pkl", b"another")
    with pytest.raises(ModelFileError, match="2 members named encoder.pkl"):
        load_bilm(twice)


def test_an_error_about_a_zip_never_names_the_private_folder_it_was_read_into(tmp_path):
    source = PUBLISHED / f"{ZIPS[0]}.zip"
    own_json = tmp_path / "own-json.zip"
    with zipfile.ZipFile(source) as original, zipfile.ZipFile(own_json, "w") as out:
        for name in original.namelist():
            data = original.read(name)
            if name == "config.json":
                data = json.dumps({**json.loads(data), "config_path": "my_architecture.json"}).encode()
            out.writestr(name, data)
    with pytest.raises(ModelFileError, match="config.json: the architecture JSON it names") as error:
        load_bilm(own_json)
    assert error.value.path == str(own_json) and "spacy-elmo-archive" not in str(error.value)
