"""A frozen biLM written once per folder (``Elmo.to_disk``), as ``spacy train`` saves model-last at
every evaluation."""
import shutil

import numpy as np
import pytest
import spacy
import torch

import spacy_elmo.pipeline
from spacy_elmo.io import load_allennlp
from spacy_elmo.pipeline import create_pipeline

from .training_runs import CONFIGS, make_data, train

WEIGHTS = ("elmo", "model", "model.safetensors")


@pytest.fixture()
def bilm_writes(monkeypatch):
    """The folders ``Elmo.to_disk`` wrote a biLM into, in order (the real writer runs)."""
    folders = []
    save = spacy_elmo.pipeline.save_bilm

    def recording(bilm, path, **kwargs):
        folders.append(path.parent.parent.name)
        return save(bilm, path, **kwargs)

    monkeypatch.setattr(spacy_elmo.pipeline, "save_bilm", recording)
    return folders


def _identity(folder):
    stat = folder.joinpath(*WEIGHTS).stat()
    return stat.st_ino, stat.st_mtime_ns


def test_a_frozen_bilm_is_written_once_per_folder_and_each_folder_loads_alone(tmp_path, tiny_paths, bilm_writes):
    nlp = create_pipeline(load_allennlp(*tiny_paths))
    expected = nlp("the bank of the river")._.elmo.layers  # the first call optimizes the biLM
    nlp.to_disk(tmp_path / "last")
    written = _identity(tmp_path / "last")
    nlp("another call")
    nlp.to_disk(tmp_path / "last")
    assert _identity(tmp_path / "last") == written and bilm_writes == ["last"]
    nlp.to_disk(tmp_path / "best")
    assert bilm_writes == ["last", "best"]
    # a folder copied elsewhere holds everything: it loads and predicts alone
    shutil.copytree(tmp_path / "last", tmp_path / "moved")
    shutil.rmtree(tmp_path / "last")
    shutil.rmtree(tmp_path / "best")
    np.testing.assert_allclose(spacy.load(tmp_path / "moved")("the bank of the river")._.elmo.layers, expected, atol=1e-6)


def test_changed_weights_missing_files_and_a_trainable_bilm_are_written_again(tmp_path, tiny_paths, bilm_writes):
    nlp = create_pipeline(load_allennlp(*tiny_paths))
    elmo = nlp.get_pipe("elmo")
    nlp.to_disk(tmp_path / "out")
    with torch.no_grad():
        next(elmo.bilm.parameters()).mul_(0.5)
    nlp.to_disk(tmp_path / "out")
    assert len(bilm_writes) == 2
    np.testing.assert_allclose(
        spacy.load(tmp_path / "out")("a b")._.elmo.layers, nlp("a b")._.elmo.layers, atol=1e-6
    )
    tmp_path.joinpath("out", *WEIGHTS).unlink()
    nlp.to_disk(tmp_path / "out")
    assert len(bilm_writes) == 3 and tmp_path.joinpath("out", *WEIGHTS).is_file()
    elmo.model.attrs["trainable"] = True
    nlp.to_disk(tmp_path / "out")
    nlp.to_disk(tmp_path / "out")
    assert len(bilm_writes) == 5


@pytest.mark.slow
def test_spacy_train_writes_a_frozen_bilm_once_into_model_last_and_both_models_load_alone(tmp_path, bilm_writes):
    data = make_data(tmp_path)
    nlp = train(CONFIGS / "tagger-elmo.cfg", data, tmp_path / "out", **{"training.eval_frequency": 10})
    # five evaluations and the final save each saved model-last; model-best is spaCy's copy of it
    assert bilm_writes == ["model-last"]
    weights = nlp.get_pipe("elmo").bilm.state_dict()
    docs = ["The bank of the river .", "They said no ."]
    tags = {}
    for name in ("model-last", "model-best"):
        alone = tmp_path / f"alone-{name}"
        shutil.copytree(tmp_path / "out" / name, alone)
        loaded = spacy.load(alone)
        for key, value in loaded.get_pipe("elmo").bilm.state_dict().items():
            assert torch.equal(value, weights[key]), key
        tags[name] = [[t.tag_ for t in doc] for doc in loaded.pipe(docs)]
        assert all(all(tag for tag in doc) for doc in tags[name])
