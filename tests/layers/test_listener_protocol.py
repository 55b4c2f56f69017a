from spacy.tokens import Doc
from spacy.vocab import Vocab
from thinc.api import Model

from spacy_elmo.layers import UPSTREAM_ATTR, get_batch_id, is_listener_for


class _Listener(Model):
    def receive(self, batch_id, outputs, backprop):
        self.got = (batch_id, outputs, backprop)


def _node(cls, upstream):
    return cls("listener", lambda model, X, is_train: (X, lambda d: d), attrs={UPSTREAM_ATTR: upstream})


def test_listener_detection_by_upstream_name():
    assert is_listener_for(_node(_Listener, "elmo"), "elmo")
    assert is_listener_for(_node(_Listener, "*"), "elmo2")
    assert not is_listener_for(_node(_Listener, "other"), "elmo")
    # the attribute alone is not enough: a listener must be able to receive
    assert not is_listener_for(_node(Model, "elmo"), "elmo")
    assert not is_listener_for(object(), "elmo")


def test_batch_id_depends_on_content():
    vocab = Vocab()
    a = [Doc(vocab, words=["a", "b"]), Doc(vocab, words=["c"])]
    b = [Doc(vocab, words=["a", "b"]), Doc(vocab, words=["d"])]
    assert get_batch_id(a) == get_batch_id([Doc(vocab, words=["a", "b"]), Doc(vocab, words=["c"])])
    assert get_batch_id(a) != get_batch_id(b)
