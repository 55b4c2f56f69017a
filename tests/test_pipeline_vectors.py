"""The component's default token vectors: the biLM's vector setting, or the plain mix one setting away."""
import hashlib

import numpy as np
import pytest
import spacy
from spacy.tokens import Doc, DocBin

from lab.release.sense_vectors import SENSE_EXAMPLE
from spacy_elmo.bilm import VectorSetting
from spacy_elmo.io import bilm_to_bytes, load_allennlp
from spacy_elmo.pipeline import create_pipeline

ATOL = 1e-5


def _with_setting(bilm, *, means=True):
    n, width = bilm.config.n_output_layers, bilm.config.output_dim
    bilm.vector_setting = VectorSetting(
        layer_weights=(0.0, 0.25, 0.75),
        layer_means=np.random.default_rng(0).normal(size=(n, width)) if means else None,
        weights_sha256=hashlib.sha256(bilm_to_bytes(bilm)).hexdigest(),
    )
    return bilm


def _expected(layers, setting, gamma=1.0):
    means = 0.0 if setting.layer_means is None else setting.layer_means[:, None, :]
    return gamma * np.tensordot(np.array(setting.layer_weights), layers - means, axes=1)


@pytest.mark.parametrize("means", [True, False])
def test_the_biLMs_setting_is_the_default(tiny_bilm, tiny_sentences, means):
    bilm = _with_setting(tiny_bilm, means=means)
    nlp = create_pipeline(bilm, config={"set_vector_hooks": True, "gamma": 2.0})
    plain = create_pipeline(bilm, config={"vectors": "plain"})
    doc = nlp(Doc(nlp.vocab, words=tiny_sentences[0]))
    old = plain(Doc(plain.vocab, words=tiny_sentences[0]))
    np.testing.assert_array_equal(doc._.elmo.layers, old._.elmo.layers)  # the layers never change
    expected = _expected(doc._.elmo.layers, bilm.vector_setting, gamma=2.0)
    np.testing.assert_allclose(doc[1]._.elmo, expected[1], atol=ATOL)
    np.testing.assert_allclose(doc[0:2]._.elmo, expected[0:2].mean(axis=0), atol=ATOL)
    np.testing.assert_array_equal(doc[1].vector, doc[1]._.elmo)
    np.testing.assert_allclose(old[1]._.elmo, old._.elmo.layers.mean(axis=0)[1], atol=ATOL)  # the mix before


def test_given_mix_weights_replace_the_settings_weights_not_its_means(tiny_bilm, tiny_sentences):
    bilm = _with_setting(tiny_bilm)
    nlp = create_pipeline(bilm, config={"mix_weights": [0.0, 0.0, 0.0]})
    doc = nlp(Doc(nlp.vocab, words=tiny_sentences[0]))
    expected = (doc._.elmo.layers - bilm.vector_setting.layer_means[:, None, :]).mean(axis=0)
    np.testing.assert_allclose(doc._.elmo.mixed, expected, atol=ATOL)


def test_a_biLM_without_a_setting_keeps_the_mean_of_the_layers(tiny_bilm, tiny_sentences):
    nlp = create_pipeline(tiny_bilm)
    doc = nlp(Doc(nlp.vocab, words=tiny_sentences[0]))
    np.testing.assert_array_equal(doc._.elmo.mixed, doc._.elmo.mix([0.0, 0.0, 0.0]))
    assert doc._.elmo.layer_means is None and nlp.get_pipe("elmo").vector_setting is None


def test_the_setting_is_saved_with_the_pipeline(tiny_bilm, tiny_paths, tiny_sentences, tmp_path):
    nlp = create_pipeline(_with_setting(tiny_bilm), config={"set_vector_hooks": True})
    before = nlp(Doc(nlp.vocab, words=tiny_sentences[0]))
    nlp.to_disk(tmp_path / "p")
    loaded = spacy.load(tmp_path / "p")
    from_bytes = create_pipeline(load_allennlp(*tiny_paths))
    assert from_bytes.get_pipe("elmo").vector_setting is None
    from_bytes.from_bytes(nlp.to_bytes())
    for other in (loaded, from_bytes):
        doc = other(Doc(other.vocab, words=tiny_sentences[0]))
        np.testing.assert_array_equal(doc._.elmo.mixed, before._.elmo.mixed)
    # a DocBin keeps the means the Doc's mix takes off
    docs = list(DocBin(docs=[before], store_user_data=True).get_docs(nlp.vocab))
    np.testing.assert_array_equal(docs[0]._.elmo.mixed, before._.elmo.mixed)


def test_a_pipeline_saved_before_vector_settings_keeps_its_mix(tiny_bilm, tiny_sentences, tmp_path):
    nlp = create_pipeline(_with_setting(tiny_bilm))
    nlp.to_disk(tmp_path / "p")
    # what a pipeline of 0.7.0 holds: no vector setting in the component's cfg, none in its config.cfg
    cfg_path = tmp_path / "p" / "elmo" / "cfg"
    cfg = spacy.util.srsly.read_json(cfg_path)
    del cfg["vector_setting"]
    spacy.util.srsly.write_json(cfg_path, cfg)
    (tmp_path / "p" / "elmo" / "model" / "vectors.json").unlink()
    config = (tmp_path / "p" / "config.cfg").read_text(encoding="utf-8")
    assert 'vectors = "model"\n' in config
    (tmp_path / "p" / "config.cfg").write_text(config.replace('vectors = "model"\n', ""), encoding="utf-8")
    loaded = spacy.load(tmp_path / "p")
    doc = loaded(Doc(loaded.vocab, words=tiny_sentences[0]))
    np.testing.assert_array_equal(doc._.elmo.mixed, doc._.elmo.mix([0.0, 0.0, 0.0]))
    assert loaded.get_pipe("elmo").vectors == "model"


def test_unknown_vectors_choice_is_refused(tiny_bilm):
    with pytest.raises(ValueError, match=r"\[components\.elmo\] vectors = 'mean': expected one of model, plain"):
        create_pipeline(tiny_bilm, config={"vectors": "mean"})


def test_the_shipped_model_gives_its_release_records_sense_example():
    """docs/probes.md's example, the README's two sentences and one more of each sense, through the
    component with the defaults: every pair's similarity is the one the release record the shipped
    vectors.json names holds (the record the model card and docs/probes.md quote, senses apart or not)."""
    import json
    from pathlib import Path

    import spacy_elmo

    shipped = Path(spacy_elmo.__file__).parent / "models" / "en_small"
    setting = json.loads((shipped / "vectors.json").read_text(encoding="utf-8"))
    record = Path(__file__).resolve().parents[1] / setting["provenance"]["record"]
    example = json.loads(record.read_text(encoding="utf-8"))["sense_example"]
    assert [(s["sense"], s["text"]) for s in example["sentences"]] == [tuple(x) for x in SENSE_EXAMPLE]
    assert json.loads(record.read_text(encoding="utf-8"))["chosen"]["layer_weights"] == setting["layer_weights"]
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config={"set_vector_hooks": True})
    banks = [next(t for t in doc if t.text == "bank") for doc in nlp.pipe([text for _, text in SENSE_EXAMPLE])]
    assert nlp.get_pipe("elmo").vector_setting is not None  # the shipped model's vectors.json is what ran
    pairs = example["after"]["pairs"]
    assert len(pairs) == 6
    for pair in pairs:
        a, b = banks[pair["first"]], banks[pair["second"]]
        assert pair["same_sense"] == (_sense(a) == _sense(b))
        assert a.similarity(b) == pytest.approx(pair["similarity"], abs=1e-3), pair
    same = [p["similarity"] for p in pairs if p["same_sense"]]
    cross = [p["similarity"] for p in pairs if not p["same_sense"]]
    assert example["after"]["senses_apart"] == (min(same) > max(cross))


def _sense(token) -> str:
    return dict((text, sense) for sense, text in SENSE_EXAMPLE)[token.doc.text]
