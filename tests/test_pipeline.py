import numpy as np
import pytest
import spacy
import torch
from spacy.tokens import Doc
from spacy.training import Example
from spacy.util import load_model_from_config
from thinc.api import Adam, Model

from spacy_elmo.fast.lockstep import paired_weights
from spacy_elmo.fast import optimize_for_inference
from spacy_elmo.io import ModelFileError, load_allennlp, save_bilm
from spacy_elmo.layers import UPSTREAM_ATTR, get_batch_id
from spacy_elmo.pipeline import create_pipeline

from .conftest import TRAINED, random_bilm

ATOL = 1e-5


@pytest.fixture()
def nlp(tiny_paths):
    return create_pipeline(load_allennlp(*tiny_paths))


def _initialized(tiny_paths, **config):
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config=config)
    options, weights = tiny_paths
    nlp.config["initialize"]["components"]["elmo"] = {"options": str(options), "weights": str(weights)}
    nlp.initialize()
    return nlp


def test_add_initialize_matches_reference(tiny_paths, tiny_sentences, tiny_expected):
    nlp = _initialized(tiny_paths)
    for i, doc in enumerate(nlp.pipe(Doc(nlp.vocab, words=w) for w in tiny_sentences)):
        np.testing.assert_allclose(doc._.elmo.layers, tiny_expected[f"layers_{i}"], atol=ATOL, err_msg=str(i))
        np.testing.assert_allclose(doc._.elmo.mixed, tiny_expected[f"elmo_{i}"], atol=ATOL)
        assert doc._.elmo.layers.dtype == np.float32 and isinstance(doc._.elmo.layers, np.ndarray)


def test_imported_shape_replaces_configured_one(tiny_paths):
    nlp = _initialized(tiny_paths, model={"@architectures": "spacy-elmo.BiLM.v2"})
    elmo = nlp.get_pipe("elmo")
    # initialize(nlp=...) writes the imported shape over the configured default (128) in the config
    assert nlp.config["components"]["elmo"]["model"]["projection_dim"] == 16
    assert elmo.bilm.config.projection_dim == 16 and elmo.cfg["bilm_options"]["lstm"]["projection_dim"] == 16
    assert nlp("a b")._.elmo.width == 32


def test_a_model_block_that_names_its_source_gets_no_shape_written_into_it(tiny_paths):
    nlp = _initialized(tiny_paths)
    block = nlp.config["components"]["elmo"]["model"]
    assert block["@architectures"] == "spacy-elmo.BiLM.v3" and "projection_dim" not in block
    assert nlp.get_pipe("elmo").bilm.config.projection_dim == 16


def test_sentence_boundaries_run_per_sentence(nlp, tiny_sentences, tiny_expected):
    nlp.add_pipe("sentencizer", first=True)
    words = tiny_sentences[0] + tiny_sentences[1]  # both end with "."
    doc = nlp(Doc(nlp.vocab, words=words))
    assert doc._.elmo.segments == ((0, 10), (10, 21))
    expected = np.concatenate([tiny_expected["layers_0"], tiny_expected["layers_1"]], axis=1)
    np.testing.assert_allclose(doc._.elmo.layers, expected, atol=ATOL)


def test_token_and_span_extensions(tiny_paths):
    nlp = create_pipeline(load_allennlp(*tiny_paths), config={"mix_weights": [1.0, 0.0, -1.0], "gamma": 0.5})
    doc = nlp("The bank by the river flooded .")
    weights = np.exp([1.0, 0.0, -1.0]) / np.exp([1.0, 0.0, -1.0]).sum()
    mixed = 0.5 * np.tensordot(weights, doc._.elmo.layers, axes=1)
    np.testing.assert_allclose(doc[1]._.elmo, mixed[1], atol=ATOL)
    np.testing.assert_allclose(doc[1:4]._.elmo, mixed[1:4].mean(axis=0), atol=ATOL)
    assert doc[2:2]._.elmo.shape == (32,) and not doc[2:2]._.elmo.any()
    assert spacy.blank("en")("unprocessed")[0]._.elmo is None


def test_mix_weights_must_match_layer_count(tiny_paths):
    with pytest.raises(ValueError, match="mix_weights has 2 values but the biLM has 3 layers"):
        _initialized(tiny_paths, mix_weights=[0.0, 1.0])


def test_vector_hooks(tiny_paths, tiny_sentences):
    nlp = create_pipeline(load_allennlp(*tiny_paths), config={"set_vector_hooks": True})
    money, river = (nlp(Doc(nlp.vocab, words=tiny_sentences[i])) for i in (2, 3))
    bank_money, bank_river = money[5], river[5]
    assert bank_money.text == bank_river.text == "bank"
    np.testing.assert_array_equal(bank_money.vector, bank_money._.elmo)
    np.testing.assert_allclose(money[1:3].vector, money[1:3]._.elmo, atol=ATOL)
    np.testing.assert_allclose(money.vector, money._.elmo.mixed.mean(axis=0), atol=ATOL)
    assert bank_money.has_vector and money.has_vector
    assert bank_money.vector_norm == pytest.approx(float(np.linalg.norm(bank_money._.elmo)))
    a, b = bank_money._.elmo, bank_river._.elmo
    assert bank_money.similarity(bank_river) == pytest.approx(float(a @ b / np.linalg.norm(a) / np.linalg.norm(b)))
    assert bank_money.similarity(bank_river) < 0.9999
    assert bank_money.similarity(bank_money) == pytest.approx(1.0)
    assert money.similarity(river) == pytest.approx(
        float(money.vector @ river.vector / np.linalg.norm(money.vector) / np.linalg.norm(river.vector))
    )
    plain = create_pipeline(load_allennlp(*tiny_paths))("bank")
    assert plain[0].vector.shape != (32,)  # no hooks: spaCy's static (here empty) vectors


def test_without_weights_or_shipped_model_says_what_to_do(monkeypatch, tmp_path):
    monkeypatch.setattr("spacy_elmo.io.loading.SHIPPED_MODEL_DIR", tmp_path / "absent")
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo")
    with pytest.raises(ValueError, match=r"\[components\.elmo\.model\] name = "):
        nlp("no weights")
    with pytest.raises(ValueError, match="no biLM weights"):
        nlp.initialize()


def test_without_weights_the_shipped_model_is_used(monkeypatch, tmp_path, tiny_bilm, tiny_expected, tiny_sentences):
    save_bilm(tiny_bilm, tmp_path / "shipped")
    monkeypatch.setattr("spacy_elmo.io.loading.SHIPPED_MODEL_DIR", tmp_path / "shipped")
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo")  # no weights given, no initialize
    doc = nlp(Doc(nlp.vocab, words=tiny_sentences[0]))
    np.testing.assert_allclose(doc._.elmo.layers, tiny_expected["layers_0"], atol=1e-5)
    other = spacy.blank("en")
    other.add_pipe("elmo")
    other.initialize()
    assert other.get_pipe("elmo").bilm.config == tiny_bilm.config


def test_bad_model_files_name_the_file(tiny_paths, tmp_path):
    options, weights = tiny_paths
    missing = tmp_path / "missing.hdf5"
    truncated = tmp_path / "truncated.hdf5"
    truncated.write_bytes(weights.read_bytes()[:1000])
    cases = [
        ({"options": options, "weights": missing}, str(missing), "not found"),
        ({"options": options, "weights": truncated}, str(truncated), "truncated"),
        ({"options": TRAINED / "options.json", "weights": weights}, str(weights), "do not match"),
        ({"model": tmp_path / "nodir"}, str(tmp_path / "nodir"), "not found"),
    ]
    for settings, path, problem in cases:
        nlp = spacy.blank("en")
        elmo = nlp.add_pipe("elmo")
        with pytest.raises(ModelFileError, match=problem) as err:
            elmo.initialize(lambda: [], **settings)
        assert err.value.path == path
    with pytest.raises(ValueError, match="together"):
        elmo.initialize(lambda: [], options=options)


def test_bad_inputs_give_finite_vectors_of_the_right_shape(nlp):
    cases = {
        "empty": [],
        "whitespace": [" ", "\n\n", "\t", "\u3000"],
        "nul": ["\x00", "a\x00b"],
        "long_token": ["x" * 1000, "é" * 1000],
        "odd_unicode": ["e\u0301", "👩‍👩‍👧", "\u202e", "\ufeff"],
        "5000_tokens": [f"t{i % 97}" for i in range(5000)],
    }
    docs = list(nlp.pipe(Doc(nlp.vocab, words=words) for words in cases.values()))
    for (name, words), doc in zip(cases.items(), docs):
        assert doc._.elmo.layers.shape == (3, len(words), 32), name
        assert np.isfinite(doc._.elmo.layers).all(), name
        assert np.isfinite(doc._.elmo.mixed).all(), name
    assert docs[-1]._.elmo.segments[:2] == ((0, 200), (200, 400)) and len(docs[-1]._.elmo.segments) == 25
    assert nlp("")._.elmo.layers.shape == (3, 0, 32)


def test_lone_surrogates_stop_at_spacy_and_the_bilm_takes_them(nlp):
    # spaCy's StringStore cannot hold a lone surrogate, so no Doc (and no elmo call) can have one
    with pytest.raises(UnicodeEncodeError):
        nlp("a \ud800 b")
    [layers] = nlp.get_pipe("elmo").bilm.embed([["a", "\ud800", "b\udfff"]])
    assert layers.shape == (3, 3, 32) and np.isfinite(layers).all()


def test_pipe_streams(nlp):
    pulled = []

    def texts():
        for i in range(1000):
            pulled.append(i)
            yield f"text number {i}"

    stream = nlp.pipe(texts(), batch_size=4)
    first = next(stream)
    assert first._.elmo.layers.shape == (3, 3, 32)
    assert len(pulled) < 100


class RecordingListener(Model):
    """The smallest listener of the protocol: keeps what the upstream component sends."""

    def __init__(self, upstream="elmo"):
        forward = lambda model, X, is_train: (X, lambda d: d)  # noqa: E731
        super().__init__("recording_listener", forward, attrs={UPSTREAM_ATTR: upstream})
        self.received = None

    def receive(self, batch_id, outputs, backprop):
        self.received = (batch_id, outputs, backprop)

    def set_upstream_shape(self, n_layers, width):
        self.shape = (n_layers, width)


class _Downstream:
    def __init__(self, name, *listeners):
        self.name = name
        self.model = Model("downstream", lambda model, X, is_train: (X, lambda d: d), layers=list(listeners))


def test_find_listeners(nlp):
    elmo = nlp.get_pipe("elmo")
    mine, wildcard, other = RecordingListener("elmo"), RecordingListener("*"), RecordingListener("elmo2")
    elmo.find_listeners(_Downstream("tagger", mine, wildcard, other))
    assert elmo.listening_components == ["tagger"] and elmo.listeners == [mine, wildcard]
    assert mine.shape == (3, 32) and not hasattr(other, "shape")
    elmo.use_bilm(random_bilm(n_layers=1))  # importing weights of another shape tells the listeners
    assert mine.shape == wildcard.shape == (2, 16)
    assert elmo.remove_listener(mine, "tagger") and elmo.remove_listener(wildcard, "tagger")
    assert elmo.listening_components == [] and not elmo.remove_listener(mine, "tagger")


def _examples(nlp, texts):
    return [Example(nlp.make_doc(t), nlp.make_doc(t)) for t in texts]


def test_update_sends_outputs_and_frozen_bilm_does_not_change(nlp):
    elmo = nlp.get_pipe("elmo")
    first, last = RecordingListener(), RecordingListener()
    elmo.add_listener(first, "a")
    elmo.add_listener(last, "b")
    examples = _examples(nlp, ["the bank .", "", "a river bank"])
    before = {k: v.clone() for k, v in elmo.bilm.state_dict().items()}
    losses = elmo.update(examples, sgd=Adam(0.1))
    batch_id, outputs, backprop = last.received
    assert first.received[0] == batch_id == get_batch_id([eg.predicted for eg in examples])
    predicted = elmo.predict([eg.predicted for eg in examples])
    for out, pred in zip(outputs, predicted):
        np.testing.assert_allclose(out.layers, pred.layers, atol=ATOL)
    first.received[2]([np.ones_like(o.layers) for o in outputs])
    backprop([np.ones_like(o.layers) for o in outputs])
    assert losses["elmo"] == pytest.approx(2 * sum(o.layers.size for o in outputs))
    for k, v in elmo.bilm.state_dict().items():
        assert torch.equal(v, before[k]), k


def test_trainable_bilm_sums_listener_gradients(tiny_paths):
    def grads(gradient_lists):
        nlp = create_pipeline(load_allennlp(*tiny_paths), config={"model": {"trainable": True}})
        elmo = nlp.get_pipe("elmo")
        listeners = [RecordingListener() for _ in gradient_lists]
        for i, listener in enumerate(listeners):
            elmo.add_listener(listener, f"c{i}")
        elmo.update(_examples(nlp, ["the bank .", "a river bank"]))
        for listener, make in zip(listeners, gradient_lists):
            _, outputs, backprop = listener.received
            backprop([make(o.layers) for o in outputs])
        return {k: p.grad.clone() for k, p in elmo.bilm.named_parameters()}, elmo

    split, _ = grads([lambda x: np.full_like(x, 0.25), lambda x: np.full_like(x, 0.75)])
    whole, elmo = grads([np.ones_like])
    for name in whole:
        torch.testing.assert_close(split[name], whole[name], msg=name)
    before = {k: v.clone() for k, v in elmo.bilm.state_dict().items()}
    elmo.finish_update(Adam(0.01))
    assert any(not torch.equal(v, before[k]) for k, v in elmo.bilm.state_dict().items())


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_bilm_on_gpu_gives_cpu_numpy_and_same_vectors(nlp, tiny_sentences, tiny_expected):
    nlp.get_pipe("elmo").bilm.to("cuda")
    doc = nlp(Doc(nlp.vocab, words=tiny_sentences[0]))
    assert isinstance(doc._.elmo.layers, np.ndarray)
    np.testing.assert_allclose(doc._.elmo.layers, tiny_expected["layers_0"], atol=1e-4)


def _paired(bilm):
    return [paired_weights(*pair) is not None for pair in zip(bilm.forward_lstm.layers, bilm.backward_lstm.layers)]


def _elmo_layers(nlp, sentences):
    return [doc._.elmo.layers for doc in nlp.pipe(Doc(nlp.vocab, words=s) for s in sentences if s)]


def test_inference_settings_are_applied_and_keep_outputs(tiny_paths, tiny_sentences):
    plain = create_pipeline(load_allennlp(*tiny_paths), config={"model": {"optimize": False, "char_cache_size": 0}})
    fast = create_pipeline(load_allennlp(*tiny_paths), config={"model": {"char_cache_size": 50}})
    assert fast.config["components"]["elmo"]["model"]["optimize"] is True  # the default
    expected = _elmo_layers(plain, tiny_sentences)
    for _ in range(2):  # the second time through the filled char cache
        for a, b in zip(_elmo_layers(fast, tiny_sentences), expected):
            np.testing.assert_allclose(a, b, atol=1e-5)
    bilm = fast.get_pipe("elmo").bilm
    assert all(_paired(bilm)) and not bilm.runner.exact
    assert bilm.runner.char_cache.max_size == 50 and len(bilm.runner.char_cache) > 0
    assert not any(_paired(plain.get_pipe("elmo").bilm)) and plain.get_pipe("elmo").bilm.runner.char_cache is None
    int8 = create_pipeline(load_allennlp(*tiny_paths), config={"model": {"precision": "int8"}})
    for a, b in zip(_elmo_layers(int8, tiny_sentences), expected):
        cosine = (a * b).sum(-1) / np.linalg.norm(a, axis=-1) / np.linalg.norm(b, axis=-1)
        assert cosine.mean() > 0.99
    assert int8.get_pipe("elmo").bilm.forward_lstm.layers[0].state_linearity.precision.name == "int8"


def test_inference_settings_survive_serialization(tiny_paths, tiny_sentences, tmp_path):
    settings = {"precision": "fp16", "char_cache_size": 77}
    nlp = create_pipeline(load_allennlp(*tiny_paths), config={"model": settings})
    expected = _elmo_layers(nlp, tiny_sentences)
    nlp.to_disk(tmp_path)
    from_disk = spacy.load(tmp_path)
    from_bytes = load_model_from_config(nlp.config, auto_fill=True).from_bytes(nlp.to_bytes())
    for loaded in (from_disk, from_bytes):
        elmo = loaded.get_pipe("elmo")
        assert (elmo.optimize, elmo.precision, elmo.char_cache_size) == (True, "fp16", 77)
        for a, b in zip(_elmo_layers(loaded, tiny_sentences), expected):
            np.testing.assert_allclose(a, b, atol=1e-5)
        assert all(_paired(elmo.bilm)) and elmo.bilm.runner.char_cache.max_size == 77
        assert elmo.bilm.forward_lstm.layers[1].projection.precision.name == "fp16"


def test_inference_settings_need_optimize(tiny_paths):
    with pytest.raises(ValueError, match="optimize = true"):
        create_pipeline(load_allennlp(*tiny_paths), config={"model": {"optimize": False}})  # the default cache size
    with pytest.raises(ValueError, match="precision"):
        create_pipeline(load_allennlp(*tiny_paths), config={"model": {"precision": "int4"}})


def test_optimized_trainable_bilm_trains_in_float32(tiny_paths, tiny_sentences):
    nlp = create_pipeline(
        load_allennlp(*tiny_paths), config={"model": {"trainable": True, "precision": "fp16", "char_cache_size": 50}}
    )
    elmo = nlp.get_pipe("elmo")
    texts = ["the bank .", "a river bank"]
    _elmo_layers(nlp, tiny_sentences)  # optimized: paired, fp16 linear layers, cache filled
    reference = load_allennlp(*tiny_paths)
    reference.load_state_dict(elmo.bilm.state_dict())
    listener = RecordingListener()
    elmo.add_listener(listener, "tagger")
    elmo.update(_examples(nlp, texts), sgd=Adam(0.01))
    _, outputs, backprop = listener.received
    expected = reference.embed([t.split() for t in texts])
    for out, layers in zip(outputs, expected):  # the training forward pass is the float32 one
        np.testing.assert_allclose(out.layers, layers, atol=1e-5)
    # training runs on the layout of a freshly built model, which gradients match (no copies)
    assert not any(_paired(elmo.bilm)) and all(p.is_contiguous() for p in elmo.bilm.parameters())
    before = {k: v.clone() for k, v in elmo.bilm.state_dict().items()}
    backprop([np.ones_like(o.layers) for o in outputs])
    assert all(p.grad is None or p.grad.dtype == torch.float32 for p in elmo.bilm.parameters())
    assert all(p.grad is None or p.grad.stride() == p.stride() for p in elmo.bilm.parameters())
    changed = [k for k, v in elmo.bilm.state_dict().items() if not torch.equal(v, before[k])]
    assert any("lstm" in k for k in changed) and any("token_encoder" in k for k in changed)
    # predicting again lays the new weights out again and converts them afresh
    reference.load_state_dict(elmo.bilm.state_dict())
    optimize_for_inference(reference, precision="fp16")
    for a, b in zip(_elmo_layers(nlp, tiny_sentences), reference.embed([s for s in tiny_sentences if s])):
        np.testing.assert_allclose(a, b, atol=1e-5)
    assert all(_paired(elmo.bilm))
