"""Real `spacy train` runs of downstream components with and without ELMo (see training_runs)."""
import numpy as np
import pytest
import spacy
import torch
from spacy.tokens import DocBin, Span
from spacy.training import Example
from spacy.util import load_config

from .training_runs import CONFIGS, make_data, tiny_bilm, train

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return make_data(tmp_path_factory.mktemp("downstream"))


def _gold(data, nlp, name="dev.spacy"):
    return list(DocBin().from_disk(data / name).get_docs(nlp.vocab))


def _tag_accuracy(nlp, gold_docs):
    examples = [Example(spacy.tokens.Doc(nlp.vocab, words=[t.text for t in g]), g) for g in gold_docs]
    return nlp.evaluate(examples)["tag_acc"]


@pytest.fixture(scope="module")
def frozen(data):
    return train(CONFIGS / "tagger-elmo.cfg", data, data / "frozen")


def _elmo_tok2vec(component):
    return next(node for node in component.model.walk() if node.name == "elmo_tok2vec")


def _bilm_params(nlp):
    return {k: v.detach().clone() for k, v in nlp.get_pipe("elmo").bilm.state_dict().items()}


def test_plain_and_elmo_taggers_learn(data, frozen):
    plain = train(CONFIGS / "tagger.cfg", data, data / "plain")
    assert plain.pipe_names == ["tagger"] and frozen.pipe_names == ["elmo", "tagger"]
    for nlp in (plain, frozen):
        # 17 UPOS tags: chance is far below this after 40 steps on 40 sentences
        assert _tag_accuracy(nlp, _gold(data, nlp, "train.spacy")) > 0.6


def test_prediction_reads_doc_elmo(frozen):
    tagger = frozen.get_pipe("tagger")
    doc = frozen("The bank by the river was closed on Sunday .")
    assert doc._.elmo is not None and doc._.elmo.layers.shape[:2] == (3, len(doc))
    scores = tagger.model.predict([doc])[0].copy()
    doc._.elmo.layers = np.zeros_like(doc._.elmo.layers)
    changed = tagger.model.predict([doc])[0]
    assert not np.allclose(scores, changed)
    # the mix was trained away from its initial equal weights
    mix = _elmo_tok2vec(tagger).get_ref("input_mix")
    assert mix.get_param("weights").any()


def test_biLM_changes_only_when_fine_tuning_is_asked_for(data, frozen):
    original = tiny_bilm().state_dict()
    for name, value in _bilm_params(frozen).items():
        assert torch.equal(value, original[name]), name
    tuned = train(
        CONFIGS / "tagger-elmo.cfg",
        data,
        data / "tuned",
        **{"components.elmo.model.trainable": True, "components.tagger.model.tok2vec.elmo_output": True},
    )
    changed = [name for name, value in _bilm_params(tuned).items() if not torch.equal(value, original[name])]
    assert len(changed) > len(original) // 2
    # [h ; ELMo] as well as [x ; ELMo]: two mixes, each trained
    tok2vec = _elmo_tok2vec(tuned.get_pipe("tagger"))
    assert tok2vec.get_ref("input_mix") is not tok2vec.get_ref("output_mix")
    assert tok2vec.get_ref("output_mix").get_param("weights").any()


def test_two_components_learn_their_own_mix(data, tmp_path):
    config = load_config(CONFIGS / "tagger-elmo.cfg")
    ner = load_config(CONFIGS / "ner-elmo.cfg")
    config["components"]["ner"] = ner["components"]["ner"]
    config["nlp"]["pipeline"] = ["elmo", "tagger", "ner"]
    config["training"]["score_weights"] = {"tag_acc": 0.5, "ents_f": 0.5}
    config.to_disk(tmp_path / "both.cfg")
    # entities for the test: runs of proper nouns
    nlp = spacy.blank("en")
    for name in ("train.spacy", "dev.spacy"):
        docs = _gold(data, nlp, name)
        for doc in docs:
            doc.ents = [Span(doc, t.i, t.i + 1, label="NAME") for t in doc if t.tag_ == "PROPN"]
        DocBin(docs=docs).to_disk(tmp_path / name)
    both = train(tmp_path / "both.cfg", tmp_path, tmp_path / "out", **{"paths.elmo": str(data / "bilm")})
    assert both.get_pipe("elmo").listening_components == ["tagger", "ner"]
    mixes = [_elmo_tok2vec(both.get_pipe(name)) for name in ("tagger", "ner")]
    weights = [m.get_ref("input_mix").get_param("weights") for m in mixes]
    assert all(w.any() for w in weights)
    assert not np.allclose(weights[0], weights[1])


def test_frozen_annotating_elmo_is_read_from_docs_during_training(data, frozen, tmp_path):
    # spaCy's way to freeze an upstream component: source it, freeze it, let it annotate; the
    # listener then reads doc._.elmo in training too (without annotation it raises)
    config = load_config(CONFIGS / "tagger-elmo.cfg")
    config["components"]["elmo"] = {"source": str(data / "frozen" / "model-last")}
    config["training"]["frozen_components"] = ["elmo"]
    config["training"]["annotating_components"] = ["elmo"]
    config.to_disk(tmp_path / "frozen.cfg")
    nlp = train(tmp_path / "frozen.cfg", data, tmp_path / "out")
    assert _tag_accuracy(nlp, _gold(data, nlp, "train.spacy")) > 0.6
    for name, value in _bilm_params(nlp).items():
        assert torch.equal(value, _bilm_params(frozen)[name]), name


def test_saved_config_names_the_biLM_once_and_the_component_describes_it(data, frozen):
    # the configs name the biLM in the model block (spacy-elmo.BiLM.v3); the shape is the source's,
    # saved with the component's weights
    config = load_config(data / "frozen" / "model-last" / "config.cfg", interpolate=True)
    saved = config["components"]["elmo"]["model"]
    assert saved["@architectures"] == "spacy-elmo.BiLM.v3" and saved["name"] == str(data / "bilm")
    assert "elmo" not in config["initialize"]["components"] and "projection_dim" not in saved
    shape = tiny_bilm().config
    assert frozen.get_pipe("elmo").bilm.config == shape
    assert saved["trainable"] is False and saved["max_batch_items"] == 4096  # other settings kept
