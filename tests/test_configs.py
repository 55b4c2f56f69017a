import shutil
import subprocess
import sys
import textwrap
from dataclasses import asdict

import inspect

import numpy as np
import pytest
import spacy
from spacy.tokens import Doc
from spacy.util import registry
from thinc.api import Config

from spacy_elmo.bilm import BiLMConfig
from spacy_elmo.bilm.config import ORIGINAL, SMALL
from spacy_elmo.io import load_allennlp
from spacy_elmo.io.loading import load_bilm
from spacy_elmo.layers import get_bilm

from .training_runs import CONFIGS, make_data

TINY_CONFIG = """
[paths]
elmo_options = null
elmo_weights = null

[nlp]
lang = "en"
pipeline = ["sentencizer", "elmo"]

[components]

[components.sentencizer]
factory = "sentencizer"

[components.elmo]
factory = "elmo"
gamma = 2.0

[components.elmo.model]
@architectures = "spacy-elmo.BiLM.v1"
char_embedding_dim = 4
filters = [[1, 4], [2, 4]]
dim = 8
projection_dim = 4
max_window = 7

[initialize]

[initialize.components]

[initialize.components.elmo]
options = ${paths.elmo_options}
weights = ${paths.elmo_weights}
"""

# A fresh interpreter: the factory and the architecture resolve through the entry points alone.
RESOLVE_SCRIPT = textwrap.dedent(
    """
    import sys
    import numpy as np
    import torch
    from spacy.tokens import Doc
    from spacy.util import load_config, load_model_from_config
    torch.set_num_threads(1)
    assert "spacy_elmo" not in sys.modules
    overrides = {"paths.elmo_options": sys.argv[2], "paths.elmo_weights": sys.argv[3]}
    nlp = load_model_from_config(load_config(sys.argv[1], overrides=overrides), auto_fill=True)
    assert "spacy_elmo" in sys.modules
    nlp.initialize()
    doc = nlp(Doc(nlp.vocab, words=sys.argv[4].split(" ")))
    np.save(sys.argv[5], doc._.elmo.layers)
    print(doc._.elmo.gamma, doc._.elmo.segments)
    """
)


def _tiny_pipeline(tiny_paths, architecture="spacy-elmo.BiLM.v2", **overrides):
    """TINY_CONFIG with another biLM architecture and dotted overrides, initialized."""
    overrides = {"paths.elmo_options": str(tiny_paths[0]), "paths.elmo_weights": str(tiny_paths[1]), **overrides}
    config = Config().from_str(TINY_CONFIG.replace("spacy-elmo.BiLM.v1", architecture), overrides=overrides)
    nlp = spacy.util.load_model_from_config(config, auto_fill=True)
    nlp.initialize()
    return nlp


def test_default_config_names_the_model_once_and_leaves_the_shape_to_it():
    nlp = spacy.blank("en")
    elmo = nlp.add_pipe("elmo")
    model = nlp.config["components"]["elmo"]["model"]
    assert model["@architectures"] == "spacy-elmo.BiLM.v3" and model["name"] is None
    assert not set(asdict(SMALL)) & set(model)
    assert (model["optimize"], model["precision"], model["char_cache_size"]) == (True, "fp32", 20000)
    component = nlp.config["components"]["elmo"]
    assert (component["optimize"], component["precision"], component["char_cache_size"]) == (None, None, None)
    assert model["trainable"] is False and model["max_window"] == 200
    assert "elmo" not in nlp.config["initialize"]["components"]
    # nothing is loaded until the weights are needed: then the shipped English biLM
    assert not elmo.cfg["has_weights"]
    assert elmo.bilm.config == load_bilm().config and elmo.cfg["has_weights"]


def _published_pair_folder(tiny_paths, folder, names=("options.json", "weights.hdf5")):
    folder.mkdir()
    shutil.copy(tiny_paths[0], folder / names[0])
    shutil.copy(tiny_paths[1], folder / names[1])
    return folder


# how bilm-tf writes a pair, and how AllenNLP serves it for download (the name of its shape in front)
NAMINGS = [("options.json", "weights.hdf5"), ("elmo_2x64_16_options.json", "elmo_2x64_16_weights.hdf5")]


@pytest.mark.parametrize("names", NAMINGS, ids=["bilm-tf names", "AllenNLP download names"])
def test_name_loads_its_source_at_initialize_and_the_saved_pipeline_keeps_it(tiny_paths, tiny_sentences, tmp_path, names):
    source = _published_pair_folder(tiny_paths, tmp_path / "pair", names)
    nlp = spacy.blank("en")
    elmo = nlp.add_pipe("elmo", config={"model": {"name": str(source)}})
    assert not elmo.cfg["has_weights"]
    nlp.initialize()
    expected = load_bilm(str(source)).embed([tiny_sentences[0]])[0]
    doc = nlp(Doc(nlp.vocab, words=tiny_sentences[0]))
    np.testing.assert_allclose(doc._.elmo.layers, expected, atol=1e-5)
    np.testing.assert_allclose(doc._.elmo.layers, load_allennlp(*tiny_paths).embed([tiny_sentences[0]])[0], atol=1e-5)
    with np.load(tiny_paths[0].parent / "expected.npz", allow_pickle=False) as allennlp:  # AllenNLP's own outputs
        np.testing.assert_allclose(doc._.elmo.layers, allennlp["layers_0"], atol=1e-5, rtol=0)
    assert nlp.config["components"]["elmo"]["model"]["name"] == str(source)
    nlp.to_disk(tmp_path / "nlp")
    shutil.rmtree(source)
    loaded = spacy.load(tmp_path / "nlp")
    np.testing.assert_array_equal(loaded(Doc(loaded.vocab, words=tiny_sentences[0]))._.elmo.layers, doc._.elmo.layers)


def test_name_loads_at_the_first_call_without_initialize(tiny_paths, tiny_sentences, tmp_path):
    source = _published_pair_folder(tiny_paths, tmp_path / "pair")
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config={"model": {"name": str(source)}})
    doc = nlp(Doc(nlp.vocab, words=tiny_sentences[0]))
    assert doc._.elmo.layers.shape == (3, len(tiny_sentences[0]), 32)


def test_a_missing_source_is_an_error_naming_the_model_block(tmp_path):
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config={"model": {"name": str(tmp_path / "nowhere")}})
    with pytest.raises(Exception, match=r"\[components.elmo.model\] name"):
        nlp.initialize()


def test_initialize_settings_still_load_a_pipeline_configured_with_bilm_v2(tiny_paths, tiny_sentences):
    nlp = _tiny_pipeline(tiny_paths, "spacy-elmo.BiLM.v2")
    block = nlp.config["components"]["elmo"]["model"]
    # the block said projection_dim = 4; the imported weights' shape is written back, as before
    assert block["projection_dim"] == nlp.get_pipe("elmo").bilm.config.projection_dim != 4
    doc = nlp(Doc(nlp.vocab, words=tiny_sentences[0]))
    assert doc._.elmo.layers.shape[0] == 3


@pytest.fixture(scope="module")
def sample_corpus(tmp_path_factory):
    return make_data(tmp_path_factory.mktemp("sample"))


PIPELINE_CONFIGS = sorted(path.name for path in CONFIGS.glob("*.cfg") if not path.name.startswith("bilm-"))


@pytest.mark.parametrize("name", PIPELINE_CONFIGS)
def test_spacy_debug_config_validates_the_pipeline_config(name, sample_corpus):
    text = (CONFIGS / name).read_text(encoding="utf-8")
    assert "lab." not in text and "lab/" not in text
    result = subprocess.run(
        [sys.executable, "-m", "spacy", "debug", "config", str(CONFIGS / name),
         "--paths.train", str(sample_corpus / "train.spacy"), "--paths.dev", str(sample_corpus / "dev.spacy")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Config is valid" in result.stdout


def test_config_string_round_trip():
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config={"model": {"max_window": 9, "trainable": True, "batch_size": 3}, "gamma": 0.5})
    config = Config().from_str(nlp.config.to_str())
    rebuilt = spacy.util.load_model_from_config(config, auto_fill=True)
    elmo = rebuilt.get_pipe("elmo")
    assert elmo.model.attrs["max_window"] == 9 and elmo.model.attrs["trainable"] is True
    assert elmo.model.attrs["batch_size"] == 3 and elmo.gamma == 0.5
    assert elmo.bilm.config == nlp.get_pipe("elmo").bilm.config


def test_config_resolves_through_entry_points_only(tiny_paths, tiny_sentences, tmp_path):
    config_path = tmp_path / "config.cfg"
    config_path.write_text(TINY_CONFIG, encoding="utf-8")
    words = tiny_sentences[0] + tiny_sentences[1]
    out = tmp_path / "layers.npy"
    result = subprocess.run(
        [sys.executable, "-c", RESOLVE_SCRIPT, str(config_path), *map(str, tiny_paths), " ".join(words), str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    # sentencizer boundaries, then windows of at most max_window = 7 tokens
    assert "2.0 ((0, 7), (7, 10), (10, 17), (17, 21))" in result.stdout
    layers = np.load(out)
    assert layers.shape == (3, len(words), 32)
    windows = [words[0:7], words[7:10], words[10:17], words[17:21]]
    expected = np.concatenate(load_allennlp(*tiny_paths).embed(windows), axis=1)
    np.testing.assert_allclose(layers, expected, atol=1e-5)


def test_bilm_v2_takes_the_arguments_and_defaults_of_v1():
    v1, v2 = (inspect.signature(registry.architectures.get(f"spacy-elmo.BiLM.{v}")).parameters for v in ("v1", "v2"))
    assert {name: p.default for name, p in v1.items()} == {name: v2[name].default for name in v1}
    assert set(v2) - set(v1) == {"optimize", "precision", "char_cache_size"}


def test_bilm_v2_called_from_python_fills_v1s_defaults_and_refuses_other_names():
    v2 = registry.architectures.get("spacy-elmo.BiLM.v2")
    model = v2(dim=64, projection_dim=16, precision="int8")
    bilm = get_bilm(model)
    assert (bilm.config.dim, bilm.config.projection_dim, bilm.config.n_layers) == (64, 16, SMALL.n_layers)
    assert model.attrs["max_window"] == 200 and model.attrs["inference"].precision.name == "int8"
    with pytest.raises(TypeError, match="dimension"):
        v2(dimension=64)


def test_bilm_v1_keeps_its_released_defaults_the_published_small_shape():
    v1 = inspect.signature(registry.architectures.get("spacy-elmo.BiLM.v1")).parameters
    shape = {name: v1[name].default for name in asdict(SMALL)}
    assert shape == {
        "char_embedding_dim": 16,
        "filters": ((1, 32), (2, 32), (3, 64), (4, 128), (5, 256), (6, 512), (7, 1024)),
        "n_highway": 1,
        "activation": "relu",
        "n_characters": 262,
        "max_characters_per_token": 50,
        "dim": 1024,
        "projection_dim": 128,
        "n_layers": 2,
        "cell_clip": 3.0,
        "proj_clip": 3.0,
        "use_skip_connections": True,
    }
    assert BiLMConfig(**shape) == SMALL


def test_bilm_config_defaults_are_the_published_original_shape():
    assert BiLMConfig() == ORIGINAL
    assert (ORIGINAL.dim, ORIGINAL.projection_dim, ORIGINAL.n_highway, ORIGINAL.n_filters) == (4096, 512, 2, 2048)


def test_bilm_v2_with_optimize_false_runs_the_exact_path(tiny_paths, tiny_sentences):
    nlp = _tiny_pipeline(tiny_paths, **{"components.elmo.model.optimize": False, "components.elmo.model.char_cache_size": 0})
    elmo = nlp.get_pipe("elmo")
    doc = nlp(Doc(nlp.vocab, words=tiny_sentences[0]))
    assert (elmo.optimize, elmo.char_cache_size) == (False, 0)
    assert elmo.bilm.runner.exact and elmo.bilm.runner.char_cache is None
    windows = [tiny_sentences[0][start:end] for start, end in doc._.elmo.segments]
    expected = np.concatenate(load_allennlp(*tiny_paths).embed(windows), axis=1)
    np.testing.assert_allclose(doc._.elmo.layers, expected, atol=1e-5)


def test_bilm_v2_with_precision_int8_runs_int8_layers(tiny_paths, tiny_sentences):
    nlp = _tiny_pipeline(tiny_paths, **{"components.elmo.model.precision": "int8"})
    nlp(Doc(nlp.vocab, words=tiny_sentences[0]))
    bilm = nlp.get_pipe("elmo").bilm
    assert not bilm.runner.exact
    assert bilm.forward_lstm.layers[0].state_linearity.precision.name == "int8"


def test_component_settings_that_disagree_with_bilm_v2_are_an_error_naming_both(tiny_paths):
    with pytest.raises(ValueError, match=r"\[components.elmo\] precision = \"int8\" disagrees with \[components.elmo.model\] precision = \"fp32\""):
        _tiny_pipeline(tiny_paths, **{"components.elmo.precision": "int8"})
    # the same value in both places is no conflict
    nlp = _tiny_pipeline(tiny_paths, **{"components.elmo.precision": "int8", "components.elmo.model.precision": "int8"})
    assert nlp.get_pipe("elmo").precision == "int8"


def test_bilm_v1_takes_the_settings_from_the_component(tiny_paths):
    nlp = _tiny_pipeline(tiny_paths, "spacy-elmo.BiLM.v1", **{"components.elmo.optimize": False, "components.elmo.char_cache_size": 0})
    elmo = nlp.get_pipe("elmo")
    assert (elmo.optimize, elmo.precision, elmo.char_cache_size) == (False, "fp32", 0)
    defaults = _tiny_pipeline(tiny_paths, "spacy-elmo.BiLM.v1").get_pipe("elmo")
    assert (defaults.optimize, defaults.precision, defaults.char_cache_size) == (True, "fp32", 20000)
