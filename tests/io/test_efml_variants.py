"""ELMoForManyLangs models of other architectures than the main fixture's (no word embedding, tanh,
one or no highway, other widths, three layers, no clipping), each built and run by EFML 0.0.4.post2
itself (lab/fixtures/make_efml_fixtures.py; tests/data/elmoformanylangs/README.md): ids equal to EFML's
and layers within 1e-5, on the plain path and with optimize_for_inference."""
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from spacy_elmo.fast import optimize_for_inference
from spacy_elmo.io import ModelFileError, load_efml

DATA = Path(__file__).resolve().parent.parent / "data" / "elmoformanylangs"
VARIANTS = DATA / "variants"
SENTENCES = json.loads((DATA / "sentences.json").read_text(encoding="utf-8"))
TOLERANCE = 1e-5
SUPPORTED = ["no-word", "tanh", "one-highway", "no-highway", "sizes", "three-layers", "no-clip"]


def _golden(name):
    with np.load(VARIANTS / name / "golden.npz", allow_pickle=False) as data:
        return {key: data[key] for key in data.files}


def _max_diff(outputs, golden) -> float:
    worst = 0.0
    for i, layers in enumerate(outputs):
        expected = golden[f"layers_{i}"]
        assert layers.shape == expected.shape, f"sentence {i}"
        if layers.size:
            worst = max(worst, float(np.abs(layers - expected).max()))
    return worst


def test_every_variant_built_is_tested():
    built = {path.name for path in VARIANTS.iterdir() if path.is_dir()}
    assert built == {*SUPPORTED, "words-only"}


@pytest.mark.parametrize("name", SUPPORTED)
def test_ids_equal_efml_ids_for_every_sentence(name):
    bilm, golden = load_efml(VARIANTS / name / "model"), _golden(name)
    for i, sentence in enumerate(SENTENCES):
        ids, lengths = bilm.batch_ids([sentence])
        assert lengths.tolist() == [len(sentence) + 2]
        np.testing.assert_array_equal(ids[0, :, 1:], golden[f"char_ids_{i}"], err_msg=f"sentence {i}")
        if f"word_ids_{i}" in golden:
            np.testing.assert_array_equal(ids[0, :, 0], golden[f"word_ids_{i}"], err_msg=f"sentence {i}")


@pytest.mark.parametrize("name", SUPPORTED)
def test_layers_match_efml_plain_and_optimized(name):
    bilm, golden = load_efml(VARIANTS / name / "model"), _golden(name)
    assert _max_diff(bilm.embed(SENTENCES), golden) <= TOLERANCE
    optimize_for_inference(bilm, char_cache_size=64)
    assert _max_diff(bilm.embed(SENTENCES), golden) <= TOLERANCE
    assert _max_diff(bilm.embed(SENTENCES), golden) <= TOLERANCE  # again, with the char-CNN cache warm


def test_a_model_without_word_embedding_needs_no_word_dic(tmp_path):
    # EFML's trainer always writes word.dic, but its Embedder reads it only when word_dim > 0
    model = Path(shutil.copytree(VARIANTS / "no-word" / "model", tmp_path / "model"))
    (model / "word.dic").unlink()
    bilm = load_efml(model)
    assert bilm.char_vocab.words is None
    assert _max_diff(bilm.embed(SENTENCES), _golden("no-word")) <= TOLERANCE


def test_a_words_only_model_efml_runs_is_refused_with_an_error():
    # EFML runs char_dim 0 (golden.npz holds its layers); spacy-elmo's biLM always has a char CNN
    assert "layers_0" in _golden("words-only")
    with pytest.raises(ModelFileError, match="char_dim is 0"):
        load_efml(VARIANTS / "words-only" / "model")
