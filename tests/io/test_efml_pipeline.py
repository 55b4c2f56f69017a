"""ELMoForManyLangs models as spaCy pipelines: converted, loaded and run as users run them, equal
to EFML's own outputs; the language from the model or --lang; blank tokenizers that need nothing extra."""
import json
from pathlib import Path

import numpy as np
import pytest
import spacy
from spacy.tokens import Doc

from spacy_elmo.io.conversion import check_language, pipeline_bilm
from spacy_elmo.fast import optimize_for_inference
from spacy_elmo.io import load_efml
from spacy_elmo.layers import get_bilm
from spacy_elmo.pipeline import create_pipeline

DATA = Path(__file__).resolve().parent.parent / "data" / "elmoformanylangs"
SENTENCES = json.loads((DATA / "sentences.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def golden():
    with np.load(DATA / "golden.npz", allow_pickle=False) as data:
        return {key: data[key] for key in data.files}


def convert(path, lang):
    """The EFML model as a pipeline of ``lang``, as `convert --model DIR --lang LANG` writes it."""
    bilm, lang = pipeline_bilm(DATA / "model", lang=lang)
    create_pipeline(bilm, lang=lang).to_disk(path)
    return path


@pytest.fixture(scope="module")
def pipeline_dir(tmp_path_factory):
    return convert(tmp_path_factory.mktemp("efml") / "de_efml", "de")


def run(nlp, sentences):
    return [nlp(Doc(nlp.vocab, words=words)) if words else nlp("") for words in sentences]


def test_a_converted_efml_pipeline_gives_efmls_layers(pipeline_dir, golden):
    nlp = spacy.load(pipeline_dir)
    assert nlp.lang == "de" and get_bilm(nlp.get_pipe("elmo").model).char_vocab is not None
    for i, doc in enumerate(run(nlp, SENTENCES)):
        expected = golden[f"layers_{i}"]
        assert doc._.elmo.layers.shape == expected.shape, i
        assert np.abs(doc._.elmo.layers - expected).max(initial=0) <= 1e-5, i


def test_an_efml_pipeline_keeps_its_vocabulary_through_bytes(pipeline_dir, golden):
    nlp = spacy.load(pipeline_dir)
    copy = spacy.blank("de")
    copy.add_pipe("elmo", config={"model": nlp.config["components"]["elmo"]["model"]})
    copy.get_pipe("elmo").from_bytes(nlp.get_pipe("elmo").to_bytes())
    got = run(copy, SENTENCES[9:10])[0]._.elmo.layers
    assert np.abs(got - golden["layers_9"]).max() <= 1e-5


def test_the_char_cache_filled_from_a_word_list_serves_efml_ids(golden):
    bilm = optimize_for_inference(load_efml(DATA / "model"), char_cache_size=50, vocab=["the", "cat", "Москва", "."])
    assert len(bilm.runner.char_cache) == 4  # filled with the model's own ids, not byte ids
    layers = bilm.embed([SENTENCES[0], SENTENCES[12]])
    assert np.abs(layers[0] - golden["layers_0"]).max() <= 1e-5
    assert np.abs(layers[1] - golden["layers_12"]).max() <= 1e-5
    assert bilm.runner.char_cache.hits > 0


def test_an_efml_directory_needs_a_language_and_spacy_must_know_it(tmp_path):
    with pytest.raises(ValueError, match="records no language; give it with --lang"):
        pipeline_bilm(DATA / "model")
    with pytest.raises(ValueError, match="spaCy cannot make a blank 'cu' pipeline here"):
        check_language("cu")


@pytest.mark.parametrize("lang,text", [
    ("de", "Die Bank am Fluss ist alt, die Bank in der Stadt neu."),
    ("ru", "Москва — столица России, а банк стоит у реки."),
    ("ar", "جلسنا على ضفة النهر قرب البنك."),
])
def test_blank_tokenizers_that_need_nothing_extra_run_raw_text(pipeline_dir, tmp_path, lang, text):
    path = convert(tmp_path / lang, lang)
    nlp = spacy.load(path)
    doc = nlp(text)
    assert nlp.lang == lang and len(doc) > 3
    layers = doc._.elmo.layers
    assert layers.shape[:2] == (3, len(doc)) and np.isfinite(layers).all()
    alone = load_efml(DATA / "model").embed([[token.text for token in doc]])[0]
    assert np.abs(layers - alone).max() <= 1e-5  # the tokenizer's words, run as EFML words
