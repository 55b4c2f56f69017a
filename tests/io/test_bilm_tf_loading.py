"""The TensorFlow layouts through the one loader, ``convert`` and ``download --pipeline``: each
gives bilm-tf's layers (tests/data/bilm_tf), and its softmax where it has one."""
import json
import shutil
import tarfile
import warnings
from pathlib import Path

import numpy as np
import pytest
import spacy
import torch
from spacy.tokens import Doc
from typer.testing import CliRunner

from spacy_elmo import load_bilm
from spacy_elmo.cli import app
from spacy_elmo.io import ModelFileError
from spacy_elmo.io.loading import load_lm_head, locate_bilm
from spacy_elmo.io.sources import PairBundleSource, TensorFlowSource
from spacy_elmo.io.registry import TF_BASE_URL_ENV, PUBLISHED_TF_MODELS

from .test_download import FixtureServer

DATA = Path(__file__).parent.parent / "data" / "bilm_tf"
REFERENCE = json.loads((DATA / "reference.json").read_text())
ARRAYS = np.load(DATA / "reference.npz", allow_pickle=False)
SENTENCES = [s.split() for s in REFERENCE["sentences"]]
runner = CliRunner()


def _assert_reference_layers(per_sentence):
    for i, layers in enumerate(per_sentence):
        n = len(SENTENCES[i])
        np.testing.assert_allclose(layers, ARRAYS["lm_embeddings"][i, :, :n], atol=1e-5, rtol=0)


@pytest.mark.parametrize(
    "layout, kind",
    [
        ("checkpoint_folder", TensorFlowSource),
        ("nlpl_full.zip", PairBundleSource),  # its model.hdf5 gives the biLM, its checkpoint the softmax
        ("nlpl_no_vocab.zip", PairBundleSource),
        ("tfhub_module", TensorFlowSource),
        ("deeppavlov_lm.tar.gz", TensorFlowSource),
        ("deeppavlov_hub.tar.gz", TensorFlowSource),
    ],
)
def test_load_bilm_reads_every_layout(layout, kind):
    source = locate_bilm(DATA / layout)
    assert type(source) is kind and source.path == DATA / layout
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the TF-Hub modules say their options are bilm-tf's published ones
        bilm = load_bilm(DATA / layout)
    _assert_reference_layers(bilm.embed(SENTENCES))


@pytest.mark.parametrize("layout", ["checkpoint_folder", "nlpl_full.zip", "deeppavlov_lm.tar.gz"])
def test_load_lm_head_gives_the_checkpoints_softmax(layout):
    bilm, head = load_lm_head(DATA / layout)
    assert torch.equal(head.softmax.weight.detach(), torch.from_numpy(ARRAYS["softmax_W"]))
    assert head.words[:3] == ("<S>", "</S>", "<UNK>") and len(head) == 32
    assert bilm.config.projection_dim == head.softmax.weight.shape[1]


def test_a_tfhub_module_has_no_head_to_load():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ModelFileError, match="no softmax"):
            load_lm_head(DATA / "tfhub_module")


def test_convert_writes_a_pipeline_from_a_checkpoint_folder(tmp_path):
    out = tmp_path / "pipeline"
    result = runner.invoke(app, ["convert", "--model", str(DATA / "checkpoint_folder"), "--lang", "en", "--output", str(out)])
    assert result.exit_code == 0, result.output
    nlp = spacy.load(out)
    docs = list(nlp.pipe(Doc(nlp.vocab, words=words) for words in SENTENCES))
    _assert_reference_layers([doc._.elmo.layers for doc in docs])


@pytest.fixture
def tf_server(tmp_path, monkeypatch):
    """A local http server standing in for DeepPavlov's and TF-Hub's, and a cache in the test's folder."""
    server = FixtureServer()
    monkeypatch.setenv(TF_BASE_URL_ENV, server.base)
    monkeypatch.setenv("SPACY_ELMO_CACHE", str(tmp_path / "cache"))
    yield server
    server.close()


def _publish(server, name, path):
    server.files[PUBLISHED_TF_MODELS[name].file_name] = path.read_bytes()


def test_download_a_deeppavlov_language_model_as_a_pipeline(tmp_path, tf_server):
    """`download deeppavlov-ru-news-lm --pipeline`: the .tar.gz as DeepPavlov ships it, from a
    local server over http (with a warning), read in place into a Russian pipeline."""
    name = "deeppavlov-ru-news-lm"
    _publish(tf_server, name, DATA / "deeppavlov_lm.tar.gz")
    with pytest.warns(RuntimeWarning, match="plain http"):
        result = runner.invoke(app, ["download", name, "--as-pipeline", "--output", str(tmp_path / "ru")])
    assert result.exit_code == 0, result.output
    # once in the cache, the name loads with no server (the archive's digest is checked)
    tf_server.files.clear()
    assert locate_bilm(name).language == "ru"
    _, head = load_lm_head(name)
    assert len(head) == 32
    nlp = spacy.load(tmp_path / "ru")
    assert nlp.lang == "ru"
    docs = list(nlp.pipe(Doc(nlp.vocab, words=words) for words in SENTENCES))
    _assert_reference_layers([doc._.elmo.layers for doc in docs])


def test_a_download_that_is_no_tensorflow_model_is_refused(tmp_path, tf_server):
    _publish(tf_server, "deeppavlov-ru-wiki", DATA / "model.hdf5")
    with pytest.warns(RuntimeWarning, match="plain http"):
        result = runner.invoke(app, ["download", "deeppavlov-ru-wiki", "--output", str(tmp_path / "files")])
    assert result.exit_code == 1
    assert "not a TensorFlow biLM archive" in result.output


def test_hdf5_dumps_beside_a_checkpoint_do_not_hide_it(tmp_path):
    """DeepPavlov's training writes ``saves/dumps/weights.hdf5`` beside ``saves/model.*``: no pair
    at the top, so the checkpoint is read; a pair at the top of a folder is read as the pair."""
    folder = tmp_path / "lm"
    with tarfile.open(DATA / "deeppavlov_lm.tar.gz") as tar:
        for member in tar.getmembers():
            target = folder / Path(member.name).relative_to("elmo-lm-ready4fine-tuning-tiny")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(tar.extractfile(member).read())
    (folder / "saves" / "dumps").mkdir()
    shutil.copy(DATA / "model.hdf5", folder / "saves" / "dumps" / "weights.hdf5")
    packed = tmp_path / "lm.tar.gz"
    with tarfile.open(packed, "w:gz") as tar:
        tar.add(folder, "lm")
    for path in (folder, packed):
        assert locate_bilm(path) == TensorFlowSource(path)
        _assert_reference_layers(load_bilm(path).embed(SENTENCES))
    shutil.copy(DATA / "model.hdf5", folder / "model.hdf5")
    assert locate_bilm(folder).files() == (folder / "model.hdf5",)


def test_the_tfhub_module_downloads_under_a_file_name_of_its_own(tmp_path, tf_server):
    """TF-Hub serves google/elmo at ``.../3?tf-hub-format=compressed``: kept as a .tar.gz (here
    from a mirror below the same base URL, over https-less http allowed for the test)."""
    name = "tfhub-elmo-3"
    assert PUBLISHED_TF_MODELS[name].url.startswith("https://")
    _publish(tf_server, name, DATA / "deeppavlov_hub.tar.gz")
    with pytest.warns(RuntimeWarning, match="plain http"):
        result = runner.invoke(app, ["download", name, "--allow-http", "--output", str(tmp_path / "files")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "files" / "google-elmo-3.tar.gz").is_file()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _assert_reference_layers(load_bilm(tmp_path / "files" / "google-elmo-3.tar.gz").embed(SENTENCES))
