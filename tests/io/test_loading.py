"""The one loader: where a biLM comes from, for load_bilm, the component and convert alike."""
import importlib
import sys

import pytest
import spacy
import torch

from spacy_elmo.architectures import bilm_model_config
from spacy_elmo.io import ModelFileError, load_bilm, resolve_bilm, save_bilm
from spacy_elmo.io import loading
from spacy_elmo.pipeline import create_pipeline, initial_bilm

from ..conftest import random_bilm


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
    with pytest.raises(ModelFileError, match="not found"):
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
    assert block["@architectures"] == "spacy-elmo.BiLM.v1" and block["max_window"] == 50
    assert isinstance(block["filters"][0], list)


@pytest.mark.parametrize(
    "module,names",
    [
        ("spacy_elmo.api", ["load_bilm", "DEFAULT_CHAR_CACHE_SIZE"]),
        ("spacy_elmo.shipped", ["load_shipped_bilm", "shipped_model_dir", "SHIPPED_MODEL_DIR"]),
        ("spacy_elmo.bilm_source", ["initial_bilm", "find_bilm_directory", "bilm_model_config", "record_shape", "ARCHITECTURE", "FACTORY"]),
    ],
)
def test_old_modules_warn_and_give_the_same_objects(module, names):
    sys.modules.pop(module, None)
    with pytest.warns(DeprecationWarning, match="deprecated"):
        old = importlib.import_module(module)
    for name in names:
        assert hasattr(old, name), name
    assert old.__dict__.get("load_bilm", load_bilm) is load_bilm
    assert old.__dict__.get("find_bilm_directory", loading.find_bilm_directory) is loading.find_bilm_directory
