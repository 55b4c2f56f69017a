"""The one loader: where a biLM comes from, for load_bilm, the component, convert and finetune alike."""
import re
import shutil
import zipfile
from pathlib import Path

import numpy as np
import pytest
import spacy
import torch

from spacy_elmo.architectures import bilm_model_config
from spacy_elmo.io import ModelFileError, load_allennlp, load_bilm, save_bilm
from spacy_elmo.io import loading
from spacy_elmo.io.loading import load_lm_head, locate_bilm, resolve_bilm
from spacy_elmo.io.sources import EFMLSource, NativeSource, PairBundleSource, PublishedPairSource
from spacy_elmo.io.registry import PUBLISHED_MODELS
from spacy_elmo.pipeline import create_pipeline, initial_bilm

from ..conftest import random_bilm
from ..published_head import write_published_head


def _same_weights(a, b) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


def test_resolve_model_directory_and_pipeline_directory(tmp_path):
    bilm = random_bilm(seed=3)
    save_bilm(bilm, tmp_path / "model")
    assert _same_weights(resolve_bilm(tmp_path / "model"), bilm)
    # a pipeline directory resolves to its elmo component's saved model
    create_pipeline(bilm).to_disk(tmp_path / "pipeline")
    assert _same_weights(resolve_bilm(tmp_path / "pipeline"), bilm)
    assert _same_weights(load_bilm(tmp_path / "pipeline", optimize=False), bilm)


def test_resolve_published_pair(tiny_paths):
    options, weights = tiny_paths
    assert _same_weights(resolve_bilm(options=options, weights=weights), load_bilm(options=options, weights=weights, optimize=False))


def test_resolve_errors_name_the_caller(tmp_path):
    with pytest.raises(ValueError, match=r"^\[initialize.components.x\]: options and weights must both"):
        resolve_bilm(options=tmp_path / "o.json", what="[initialize.components.x]")
    with pytest.raises(ValueError, match="not both"):
        resolve_bilm(tmp_path, weights=tmp_path / "w", what="--model")
    with pytest.raises(ModelFileError, match="no such file or directory"):
        resolve_bilm(tmp_path / "missing")


def test_pipeline_directory_needs_one_elmo_component(tmp_path):
    nlp = spacy.blank("en")
    nlp.to_disk(tmp_path / "blank")
    with pytest.raises(ModelFileError, match="no elmo component"):
        resolve_bilm(tmp_path / "blank")


def test_missing_shipped_model_errors_and_component_says_what_to_do(tmp_path, monkeypatch):
    monkeypatch.setattr(loading, "SHIPPED_MODEL_DIR", tmp_path / "absent")
    with pytest.raises(ModelFileError, match="not installed"):
        resolve_bilm()
    with pytest.raises(ValueError, match=r"component has no biLM weights.*\[initialize.components.elmo\]"):
        initial_bilm(options=None, weights=None, model=None)


def test_component_block_builds_the_architecture():
    block = bilm_model_config(random_bilm().config, max_window=50)
    assert block["@architectures"] == "spacy-elmo.BiLM.v2" and block["max_window"] == 50
    assert isinstance(block["filters"][0], list)


@pytest.fixture
def no_download(monkeypatch):
    """Any download fails the test: nothing here may reach for the network."""
    monkeypatch.setattr(loading, "fetch_published", lambda *a, **k: pytest.fail(f"download asked for: {a}"))


@pytest.mark.parametrize(
    "typo", ["modle-best", "./modle-best", "~/no-such-elmo-model", "runs/model-best", "weights.hdf5", "smal.json"]
)
def test_a_mistyped_path_is_an_error_naming_it_and_downloads_nothing(no_download, tmp_path, monkeypatch, typo):
    monkeypatch.chdir(tmp_path)
    save_bilm(random_bilm(), tmp_path / "model-best")
    if typo == "modle-best":  # no mark of a path: read as a name, and no published model has it
        match = r"modle-best: not found: neither an existing path nor a published model name"
    else:
        match = f"^{re.escape(typo)}: not found: no such file or directory"
    with pytest.raises(ModelFileError, match=match) as err:
        load_bilm(typo)
    assert err.value.path == typo


def test_an_unknown_name_lists_the_published_names(no_download):
    with pytest.raises(ModelFileError, match="neither an existing path nor a published model name") as err:
        locate_bilm("elmo-large")
    for name in PUBLISHED_MODELS:
        assert name in str(err.value)


def test_a_registered_name_is_the_only_thing_that_downloads(monkeypatch, tiny_paths):
    asked = []
    monkeypatch.setattr(loading, "fetch_published", lambda name: asked.append(name) or tiny_paths)
    assert locate_bilm("original-5.5b") == PublishedPairSource(*tiny_paths, language="en")
    assert asked == ["original-5.5b"]
    # an ELMoForManyLangs language by its ISO code: the unpacked archive, with its language
    unpacked = []
    monkeypatch.setattr(loading, "fetch_archive", lambda name: unpacked.append(name) or Path("/cache/de/model"))
    assert locate_bilm("de") == EFMLSource(Path("/cache/de/model"), language="de")
    assert unpacked == ["de"] and asked == ["original-5.5b"]


def test_a_zip_of_a_published_pair_is_located_with_its_language(no_download, tmp_path, tiny_paths):
    import json
    import zipfile

    path = tmp_path / "209.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.write(tiny_paths[0], "options.json")
        archive.write(tiny_paths[1], "model.hdf5")
        archive.writestr("meta.json", json.dumps({"corpus": [{"language": "nb"}]}))
    assert locate_bilm(path) == PairBundleSource(path, language="nb")
    assert _same_weights(load_bilm(path, optimize=False), load_allennlp(*tiny_paths))


def test_a_file_that_is_no_model_says_why_with_the_archives_own_error(no_download, tmp_path):
    other = tmp_path / "notes.zip"
    with zipfile.ZipFile(other, "w") as archive:
        archive.writestr("notes.txt", "no model here")
    with pytest.raises(ModelFileError, match="this one holds notes.txt") as error:
        locate_bilm(other)
    assert error.value.path == str(other)
    # a damaged zip: the zip reader's own error, not "a file"
    damaged = tmp_path / "damaged.zip"
    damaged.write_bytes(b"PK\x03\x04 cut short")
    with pytest.raises(ModelFileError, match="not a readable zip archive"):
        load_bilm(damaged)
    # a file that is no zip at all
    (tmp_path / "weights.bin").write_bytes(b"\x00" * 16)
    with pytest.raises(ModelFileError, match="a file, not a model directory or a zip of a published model"):
        locate_bilm(tmp_path / "weights.bin")


@pytest.mark.parametrize("weights_name", ["weights.hdf5", "model.hdf5"])
def test_a_directory_holding_a_published_pair_loads_as_the_pair(no_download, tmp_path, tiny_paths, weights_name):
    options, weights = tiny_paths
    shutil.copy(options, tmp_path / "options.json")
    shutil.copy(weights, tmp_path / weights_name)
    (tmp_path / "vocab.txt").write_text("<S>\n</S>\n<UNK>\nthe\n", encoding="utf-8")  # as NLPL ships it
    assert locate_bilm(tmp_path) == PairBundleSource(tmp_path) and locate_bilm(tmp_path).files() == (tmp_path / weights_name,)
    assert _same_weights(load_bilm(tmp_path, optimize=False), load_allennlp(options, weights))


SHAPE = "elmo_2x1024_128_2048cnn_1xhighway"
# a standard name -> the name AllenNLP serves the file under (the vocabulary: bilm-tf's README's)
ALLENNLP_NAMES = {
    "options.json": f"{SHAPE}_options.json", "weights.hdf5": f"{SHAPE}_weights.hdf5",
    "tiny_softmax_weights.hdf5": f"{SHAPE}_softmax_weights.hdf5", "vocab.txt": "vocab-2016-09-10.txt",
}


def test_a_folder_of_allennlps_download_names_is_the_pair_with_its_softmax_zipped_or_not(no_download, tmp_path):
    standard = write_published_head(tmp_path / "standard")
    folder = tmp_path / "downloaded"
    folder.mkdir()
    for name, served in ALLENNLP_NAMES.items():
        shutil.copy(standard / name, folder / served)
    zipped = tmp_path / "downloaded.zip"
    with zipfile.ZipFile(zipped, "w") as archive:
        for file in folder.iterdir():
            archive.write(file, f"elmo/{file.name}")
    sentences = [["the", "cat", "sees", "a", "bird", "."], ["red", "zebra"]]
    bilm, head = load_lm_head(standard)
    for model in (folder, zipped):
        assert type(locate_bilm(model)) is PairBundleSource
        renamed, renamed_head = load_lm_head(model)
        assert _same_weights(renamed, bilm) and _same_weights(load_bilm(model, optimize=False), bilm)
        for mine, theirs in zip(renamed.embed(sentences), bilm.embed(sentences)):
            assert np.array_equal(mine, theirs)
        assert renamed_head.words == head.words and torch.equal(renamed_head.softmax.weight, head.softmax.weight)
        assert torch.equal(renamed_head.softmax.bias, head.softmax.bias)
    assert locate_bilm(folder).files() == (folder / f"{SHAPE}_weights.hdf5",)
    # without its softmax: the biLM alone
    (folder / f"{SHAPE}_softmax_weights.hdf5").unlink()
    assert _same_weights(resolve_bilm(folder), bilm) and locate_bilm(folder).head() is None


def test_a_folder_with_two_candidate_pairs_says_which_files_it_cannot_choose_between(no_download, tmp_path, tiny_paths):
    options, weights = tiny_paths
    shutil.copy(options, tmp_path / f"{SHAPE}_options.json")
    shutil.copy(weights, tmp_path / f"{SHAPE}_weights.hdf5")
    shutil.copy(weights, tmp_path / "elmo_2x4096_512_2048cnn_2xhighway_weights.hdf5")
    with pytest.raises(ModelFileError, match=r"2 weights files \(elmo_2x1024.*, elmo_2x4096.*\)"):
        load_bilm(tmp_path)
    (tmp_path / "elmo_2x4096_512_2048cnn_2xhighway_weights.hdf5").unlink()
    shutil.copy(options, tmp_path / "elmo_other_options.json")
    with pytest.raises(ModelFileError, match="2 options files"):
        load_bilm(tmp_path)
    (tmp_path / "elmo_other_options.json").unlink()
    (tmp_path / f"{SHAPE}_weights.hdf5").unlink()
    with pytest.raises(ModelFileError, match=f"{SHAPE}_options.json but no weights.hdf5 or model.hdf5"):
        load_bilm(tmp_path)


def test_a_directory_with_options_but_no_weights_says_what_it_expected(no_download, tmp_path, tiny_paths):
    shutil.copy(tiny_paths[0], tmp_path / "options.json")
    with pytest.raises(ModelFileError, match="options.json but no weights.hdf5 or model.hdf5"):
        resolve_bilm(tmp_path)
    (tmp_path / "options.json").unlink()
    with pytest.raises(ModelFileError, match="not a biLM: no config.json"):
        resolve_bilm(tmp_path)


def test_our_directory_wins_over_a_published_name(no_download, tmp_path, monkeypatch):
    bilm = random_bilm(seed=5)
    save_bilm(bilm, tmp_path / "small")
    monkeypatch.chdir(tmp_path)
    assert locate_bilm("small") == NativeSource(Path("small"))
    assert _same_weights(resolve_bilm("small"), bilm)


def test_nothing_given_is_the_shipped_biLM():
    assert locate_bilm() == NativeSource(loading.shipped_model_dir(), language="en", shipped=True)


def test_load_bilm_puts_every_tensor_on_the_device_asked_for(tiny_paths):
    """Every parameter and buffer, and what the default path derives from them (the paired
    directions), on the device named; the meta device stands in for cuda here."""
    bilm = load_bilm(options=tiny_paths[0], weights=tiny_paths[1], device="meta")
    tensors = [*bilm.parameters(), *bilm.buffers()]
    assert tensors and {t.device.type for t in tensors} == {"meta"}
    assert bilm.device.type == "meta" and bilm.runner is not None
    plain = load_bilm(options=tiny_paths[0], weights=tiny_paths[1], optimize=False)
    assert plain.device.type == "cpu" and plain.runner is None
