import numpy as np
import pytest
from spacy.tokens import Doc
from spacy.vocab import Vocab

from spacy_elmo.architectures import elmo_listener_v1
from spacy_elmo.data_classes import ElmoOutput
from spacy_elmo.extensions import install_extensions
from spacy_elmo.layers import get_batch_id, is_listener_for
from spacy_elmo.layers.listener import ElmoListener

N_LAYERS, WIDTH = 3, 4


@pytest.fixture()
def docs():
    install_extensions()
    vocab = Vocab()
    return [Doc(vocab, words=["a", "b", "c"]), Doc(vocab, words=["d", "e"])]


def _outputs(docs, seed=0):
    rng = np.random.default_rng(seed)
    return [ElmoOutput(layers=rng.normal(size=(N_LAYERS, len(d), WIDTH)).astype("float32")) for d in docs]


def _listener(grad_factor=1.0):
    listener = ElmoListener("elmo", grad_factor=grad_factor)
    listener.set_upstream_shape(N_LAYERS, WIDTH)
    return listener


class Recorder:
    def __init__(self):
        self.calls = []

    def __call__(self, d_layers):
        self.calls.append(d_layers)
        return []


def test_listener_is_found_by_the_protocol():
    listener = _listener()
    assert is_listener_for(listener, "elmo")
    assert not is_listener_for(listener, "other")
    assert is_listener_for(ElmoListener("*"), "other")


def test_training_uses_the_received_batch_and_scales_the_gradient(docs):
    listener = _listener(grad_factor=0.5)
    outputs, recorder = _outputs(docs), Recorder()
    listener.receive(get_batch_id(docs), outputs, recorder)
    layers, backprop = listener(docs, is_train=True)
    assert all(a is b.layers or np.array_equal(a, b.layers) for a, b in zip(layers, outputs))
    d_layers = [np.ones_like(x) for x in layers]
    backprop(d_layers)
    assert len(recorder.calls) == 1
    assert all(np.allclose(d, 0.5) for d in recorder.calls[0])


def test_zero_grad_factor_still_calls_upstream_with_zeros(docs):
    # the last listener's callback runs the upstream update, so it must be called
    listener = _listener(grad_factor=0.0)
    recorder = Recorder()
    listener.receive(get_batch_id(docs), _outputs(docs), recorder)
    layers, backprop = listener(docs, is_train=True)
    backprop([np.ones_like(x) for x in layers])
    assert len(recorder.calls) == 1 and all(not d.any() for d in recorder.calls[0])


def test_a_different_batch_is_refused(docs):
    listener = _listener()
    listener.receive(get_batch_id(docs), _outputs(docs), Recorder())
    other = [Doc(docs[0].vocab, words=["x", "y"])]
    with pytest.raises(ValueError, match="different batch"):
        listener(other, is_train=True)


def test_prediction_reads_doc_elmo_and_zeros_when_missing(docs):
    listener = _listener()
    stored = _outputs(docs, seed=1)
    docs[0]._.elmo = stored[0]
    # a received training batch is ignored at prediction time
    listener.receive(get_batch_id(docs), _outputs(docs, seed=2), Recorder())
    layers, _ = listener(docs, is_train=False)
    np.testing.assert_array_equal(layers[0], stored[0].layers)
    assert layers[1].shape == (N_LAYERS, 2, WIDTH) and not layers[1].any()


def test_frozen_annotating_upstream_is_read_from_docs(docs):
    listener = _listener()
    stored = _outputs(docs, seed=3)
    for doc, out in zip(docs, stored):
        doc._.elmo = out
    layers, backprop = listener(docs, is_train=True)
    np.testing.assert_array_equal(layers[1], stored[1].layers)
    assert backprop([np.ones_like(x) for x in layers]) == []


def test_training_without_batch_or_annotation_says_what_to_do(docs):
    with pytest.raises(ValueError, match="annotating_components"):
        _listener()(docs, is_train=True)


def test_a_batch_is_used_once(docs):
    listener = _listener()
    listener.receive(get_batch_id(docs), _outputs(docs), Recorder())
    listener(docs, is_train=True)
    with pytest.raises(ValueError, match="annotating_components"):
        listener(docs, is_train=True)


def test_unknown_shape_is_an_error_at_prediction(docs):
    with pytest.raises(ValueError, match="shape"):
        ElmoListener("elmo")(docs, is_train=False)


def test_each_component_learns_its_own_mix(docs):
    a, b = elmo_listener_v1(upstream="elmo"), elmo_listener_v1(upstream="elmo")
    outputs = _outputs(docs)
    for model in (a, b):
        model.get_ref("listener").set_upstream_shape(N_LAYERS, WIDTH)
        model.initialize(X=docs)
    for model, target in ((a, 0), (b, 2)):
        # one biLM run, sent to both listeners; each gradient favours a different layer
        model.get_ref("listener").receive(get_batch_id(docs), outputs, Recorder())
        mixed, backprop = model(docs, is_train=True)
        backprop([-out.layers[target] for out in outputs])
    grads_a, grads_b = a.get_ref("mix").get_grad("weights"), b.get_ref("mix").get_grad("weights")
    # descending the gradient raises the weight of the favoured layer, in each mix separately
    assert np.argmin(grads_a) == 0 and np.argmin(grads_b) == 2
    assert a.get_ref("mix") is not b.get_ref("mix")
