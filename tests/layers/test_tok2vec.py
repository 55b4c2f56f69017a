import numpy as np
import pytest
from spacy.tokens import Doc
from spacy.ml.models import MaxoutWindowEncoder, MultiHashEmbed
from spacy.vocab import Vocab

from spacy_elmo.architectures import elmo_listener_v1, elmo_tok2vec_v1
from spacy_elmo.data_classes import ElmoOutput
from spacy_elmo.extensions import install_extensions
from spacy_elmo.layers import get_batch_id

N_LAYERS, ELMO_WIDTH, WIDTH = 3, 6, 8


@pytest.fixture()
def docs():
    install_extensions()
    vocab = Vocab()
    return [Doc(vocab, words=["the", "bank", "is", "closed"]), Doc(vocab, words=["river", "bank"])]


def _tok2vec(*, embed=True, encode=True, elmo_input=True, elmo_output=False):
    elmo = elmo_listener_v1(upstream="elmo")
    elmo.get_ref("listener").set_upstream_shape(N_LAYERS, ELMO_WIDTH)
    return elmo_tok2vec_v1(
        elmo=elmo,
        embed=MultiHashEmbed(width=WIDTH, attrs=["NORM", "SHAPE"], rows=[50, 20], include_static_vectors=False)
        if embed
        else None,
        encode=MaxoutWindowEncoder(width=WIDTH, depth=1, window_size=1, maxout_pieces=2) if encode else None,
        elmo_input=elmo_input,
        elmo_output=elmo_output,
    )


def _layers(docs, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.normal(size=(N_LAYERS, len(d), ELMO_WIDTH)).astype("float32") for d in docs]


def _run(model, docs, layers, is_train):
    """Forward pass with ``layers`` as the upstream output; RETURNS (Y, backprop, sent gradients)."""
    sent = []
    model.get_ref("listener").receive(get_batch_id(docs), [ElmoOutput(layers=x) for x in layers], sent.append)
    Y, backprop = model(docs, is_train=is_train)
    return Y, backprop, sent


@pytest.mark.parametrize(
    "settings,width",
    [
        (dict(elmo_input=True, elmo_output=False), WIDTH),
        (dict(elmo_input=False, elmo_output=True), WIDTH + ELMO_WIDTH),
        (dict(elmo_input=True, elmo_output=True), WIDTH + ELMO_WIDTH),
        (dict(embed=False, encode=False, elmo_input=True), ELMO_WIDTH),
        (dict(encode=False, elmo_input=True), WIDTH + ELMO_WIDTH),
    ],
)
def test_output_width(docs, settings, width):
    model = _tok2vec(**settings)
    model.initialize(X=docs)
    assert model.get_dim("nO") == width
    assert [y.shape for y in model.predict(docs)] == [(len(d), width) for d in docs]


@pytest.mark.parametrize("settings", [dict(elmo_input=True, elmo_output=True), dict(elmo_input=False, elmo_output=True)])
def test_gradient_into_the_biLM_layers_is_exact_and_sent_once(docs, settings):
    model = _tok2vec(**settings)
    model.initialize(X=docs)
    layers = _layers(docs)
    rng = np.random.default_rng(1)
    Y, backprop, sent = _run(model, docs, layers, is_train=True)
    dY = [rng.normal(size=y.shape).astype("float32") for y in Y]
    backprop(dY)
    assert len(sent) == 1  # one biLM gradient per batch, however many mixes read the layers
    # directional derivative by central differences (dropout is 0 in these models)
    direction, eps = _layers(docs, seed=2), 1e-2
    numeric = (_score(model, docs, layers, direction, dY, eps) - _score(model, docs, layers, direction, dY, -eps)) / (
        2 * eps
    )
    analytic = sum(float((g * v).sum()) for g, v in zip(sent[0], direction))
    assert analytic == pytest.approx(numeric, rel=2e-2, abs=1e-3)


def _score(model, docs, layers, direction, dY, eps):
    """<f(layers + eps * direction), dY> where the docs carry the shifted layers (prediction mode)."""
    for doc, x, v in zip(docs, layers, direction):
        doc._.elmo = ElmoOutput(layers=x + eps * v)
    Y = model.predict(docs)
    return sum(float((y.astype("float64") * d).sum()) for y, d in zip(Y, dY))


def test_needs_elmo_somewhere_and_an_input():
    with pytest.raises(ValueError, match="input"):
        _tok2vec(embed=False, elmo_input=False, elmo_output=True)


@pytest.mark.parametrize("elmo_input", [True, False])
def test_a_docs_vectors_do_not_depend_on_its_batch_mates(elmo_input):
    # the batch runs through the window encoder as one array: without its receptive field of
    # padding between Docs, each Doc's edge tokens saw the neighbouring Doc
    install_extensions()
    vocab = Vocab()
    docs = [Doc(vocab, words=w.split()) for w in ("a b c d e f g", "the river bank", "h i j k l")]
    model = elmo_tok2vec_v1(
        elmo=elmo_listener_v1(upstream="elmo"),
        embed=MultiHashEmbed(width=WIDTH, attrs=["NORM"], rows=[50], include_static_vectors=False),
        encode=MaxoutWindowEncoder(width=WIDTH, depth=3, window_size=2, maxout_pieces=2),
        elmo_input=elmo_input,
        elmo_output=not elmo_input,
    )
    model.get_ref("listener").set_upstream_shape(N_LAYERS, ELMO_WIDTH)
    layers = _layers(docs)
    for doc, x in zip(docs, layers):
        doc._.elmo = ElmoOutput(layers=x)
    model.initialize(X=docs)
    together = model.predict(docs)
    for doc, vectors in zip(docs, together):
        np.testing.assert_allclose(model.predict([doc])[0], vectors, atol=1e-6)
