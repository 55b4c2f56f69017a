"""nlp.replace_listeners gives a listening component its own copy of the biLM (spacy-transformers'
replace_listener contract): it predicts as before, without the elmo component, after saving and
loading, and sourced into another pipeline."""
import numpy as np
import pytest
import spacy
import srsly
import torch
from spacy.tokens import Doc
from spacy.training import Example

from spacy_elmo.initial_weights import pack_bilm, unpack_bilm
from spacy_elmo.io import save_bilm
from spacy_elmo.layers import get_bilm

from ..training_runs import CONFIGS, make_data, train

TEXTS = ["The river bank was muddy .", "Anna flew to Paris on Monday .", "We watched the boats ."]
TOK2VEC = {
    "@architectures": "spacy-elmo.ElmoTok2Vec.v1",
    "elmo": {"@architectures": "spacy-elmo.ElmoListener.v1", "upstream": "elmo", "dropout": 0.1},
    "embed": {
        "@architectures": "spacy.MultiHashEmbed.v2",
        "width": 16,
        "attrs": ["NORM", "SHAPE"],
        "rows": [200, 50],
        "include_static_vectors": False,
    },
    "encode": {"@architectures": "spacy.MaxoutWindowEncoder.v2", "width": 16, "depth": 1, "window_size": 1, "maxout_pieces": 2},
}
MODELS = {
    "tagger": {"@architectures": "spacy.Tagger.v2", "tok2vec": TOK2VEC},
    "ner": {
        "@architectures": "spacy.TransitionBasedParser.v2",
        "state_type": "ner",
        "extra_state_tokens": False,
        "hidden_width": 16,
        "maxout_pieces": 2,
        "use_upper": True,
        "tok2vec": TOK2VEC,
    },
    "textcat": {
        "@architectures": "spacy.TextCatReduce.v1",
        "exclusive_classes": True,
        "use_reduce_first": False,
        "use_reduce_last": False,
        "use_reduce_max": False,
        "use_reduce_mean": True,
        "tok2vec": TOK2VEC,
    },
}


def _annotations(kind, words):
    if kind == "tagger":
        return {"tags": ["NOUN" if w[0].isupper() else "X" for w in words]}
    if kind == "ner":
        return {"entities": [f"U-{'LOC' if w == 'Paris' else 'PER'}" if w in ("Anna", "Paris") else "O" for w in words]}
    return {"cats": {"pos": float("river" in words), "neg": float("river" not in words)}}


def _examples(nlp, kind):
    return [Example.from_dict(Doc(nlp.vocab, words=t.split()), _annotations(kind, t.split())) for t in TEXTS]


def _trained(kind, bilm_dir, trainable=False):
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config={"model": {"name": str(bilm_dir), "trainable": trainable}})
    nlp.add_pipe(kind, config={"model": MODELS[kind]})
    examples = _examples(nlp, kind)
    optimizer = nlp.initialize(lambda: examples)
    for _ in range(5):
        nlp.update(examples, sgd=optimizer)
    return nlp


def _predictions(nlp, kind):
    docs = [Doc(nlp.vocab, words=text.split()) for text in TEXTS]
    docs = list(nlp.pipe(docs))
    if kind == "tagger":
        return [[t.tag_ for t in doc] for doc in docs]
    if kind == "ner":
        return [[(e.start, e.end, e.label_) for e in doc.ents] for doc in docs]
    return [doc.cats for doc in docs]


def _scores(nlp, kind):
    """The component's raw scores (tagger, textcat: arrays of its model; NER: its entities)."""
    if kind == "ner":
        return _predictions(nlp, kind)
    docs = [Doc(nlp.vocab, words=text.split()) for text in TEXTS]
    if "elmo" in nlp.pipe_names:
        docs = list(nlp.get_pipe("elmo").pipe(docs))
    scores = nlp.get_pipe(kind).model.predict(docs)
    return [np.asarray(s) for s in scores] if isinstance(scores, list) else [np.asarray(scores)]


@pytest.fixture(scope="module")
def bilm_dir(tmp_path_factory):
    from ..conftest import load_tiny_bilm

    path = tmp_path_factory.mktemp("standalone") / "bilm"
    save_bilm(load_tiny_bilm(), path)
    return path


@pytest.mark.parametrize("kind", ["tagger", "ner", "textcat"])
def test_replaced_listeners_predict_as_before_alone_saved_and_sourced(kind, bilm_dir, tmp_path):
    nlp = _trained(kind, bilm_dir)
    before, scores = _predictions(nlp, kind), _scores(nlp, kind)
    upstream = nlp.get_pipe("elmo")
    nlp.replace_listeners("elmo", kind, ["model.tok2vec"])
    assert kind not in upstream.listening_components
    elmo_block = nlp.config["components"][kind]["model"]["tok2vec"]["elmo"]
    assert elmo_block["@architectures"] == "spacy-elmo.StandaloneElmo.v1"
    assert elmo_block["bilm"]["name"] == str(bilm_dir) and elmo_block["dropout"] == 0.1
    assert _predictions(nlp, kind) == before
    for a, b in zip(_scores(nlp, kind), scores):
        np.testing.assert_array_equal(a, b)
    # its own copy: the elmo component's biLM can change or go without changing the component
    own = [n for n in nlp.get_pipe(kind).model.walk() if n.name == "elmo_standalone"]
    assert len(own) == 1 and get_bilm(own[0].layers[0]) is not upstream.bilm
    nlp.to_disk(tmp_path / "nlp")
    nlp.remove_pipe("elmo")
    assert _predictions(nlp, kind) == before
    loaded = spacy.load(tmp_path / "nlp")
    assert _predictions(loaded, kind) == before
    blank = spacy.blank("en")
    blank.add_pipe(kind, source=loaded)
    assert blank.pipe_names == [kind] and _predictions(blank, kind) == before
    blank.to_disk(tmp_path / "alone")
    assert _predictions(spacy.load(tmp_path / "alone"), kind) == before


def test_a_saved_copy_comes_back_in_its_own_shape_without_pickles(bilm_dir):
    nlp = _trained("tagger", bilm_dir)
    nlp.replace_listeners("elmo", "tagger", ["model.tok2vec"])
    data = nlp.get_pipe("tagger").model.to_bytes()
    shims = [shim for node in srsly.msgpack_loads(data)["shims"] for shim in node]
    assert len(shims) == 1
    state = srsly.msgpack_loads(srsly.msgpack_loads(shims[0])["state"])
    assert set(state) == {"options", "char_vocab", "weights"}  # safetensors, not a torch.save pickle
    rebuilt = spacy.blank("en").add_pipe("tagger", config={"model": nlp.config["components"]["tagger"]["model"]})
    own = [n for n in rebuilt.model.walk() if n.name == "elmo_standalone"][0]
    assert not own.attrs["has_weights"]
    rebuilt.model.from_bytes(data)
    assert own.attrs["has_weights"] and get_bilm(own.layers[0]).config == nlp.get_pipe("elmo").bilm.config


def test_a_trainable_copy_trains_alone_and_predicts_with_its_new_weights(bilm_dir):
    nlp = _trained("tagger", bilm_dir, trainable=True)
    nlp("warm up the inference settings on the weights before the copy trains")
    nlp.replace_listeners("elmo", "tagger", ["model.tok2vec"])
    own = next(n for n in nlp.get_pipe("tagger").model.walk() if n.name == "elmo_standalone")
    upstream = {k: v.clone() for k, v in nlp.get_pipe("elmo").bilm.state_dict().items()}
    copied = {k: v.clone() for k, v in get_bilm(own.layers[0]).state_dict().items()}
    optimizer = nlp.resume_training()
    for _ in range(3):
        nlp.update(_examples(nlp, "tagger"), sgd=optimizer, exclude=["elmo"])
    assert own.layers[0].layers[0].shims[0].id != nlp.get_pipe("elmo").model.layers[0].shims[0].id
    trained = get_bilm(own.layers[0])
    assert any(not torch.equal(v, copied[k]) for k, v in trained.state_dict().items())
    assert all(torch.equal(v, upstream[k]) for k, v in nlp.get_pipe("elmo").bilm.state_dict().items())
    words = TEXTS[0].split()
    layers = own.predict([Doc(nlp.vocab, words=words)])[0]
    fresh = unpack_bilm(None, pack_bilm(trained), "cpu").embed([words])[0]
    np.testing.assert_allclose(layers, fresh, atol=1e-5)


def test_replacing_before_the_weights_are_loaded_says_what_to_do(bilm_dir):
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config={"model": {"name": str(bilm_dir)}})
    nlp.add_pipe("tagger", config={"model": MODELS["tagger"]})
    with pytest.raises(ValueError, match="after nlp.initialize"):
        nlp.replace_listeners("elmo", "tagger", ["model.tok2vec"])


@pytest.mark.slow
def test_a_tagger_trained_with_the_shipped_config_is_replaced_saved_and_sourced(tmp_path):
    data = make_data(tmp_path / "data")
    nlp = train(CONFIGS / "tagger-elmo.cfg", data, tmp_path / "out", **{"training.max_steps": 10, "training.eval_frequency": 10})
    texts = ["The dog barked at the mailman .", "I live in a small town near the river ."]
    before = [[t.tag_ for t in doc] for doc in nlp.pipe(texts)]
    nlp.replace_listeners("elmo", "tagger", ["model.tok2vec"])
    assert [[t.tag_ for t in doc] for doc in nlp.pipe(texts)] == before
    nlp.to_disk(tmp_path / "replaced")
    blank = spacy.blank("en")
    blank.add_pipe("tagger", source=spacy.load(tmp_path / "replaced"))
    assert [[t.tag_ for t in doc] for doc in blank.pipe(texts)] == before
