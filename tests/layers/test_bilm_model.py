import numpy as np
import pytest
import torch
from spacy.tokens import Doc
from spacy.vocab import Vocab

from spacy_elmo.bilm import batch_char_ids
from spacy_elmo.layers import ElmoBiLM, get_bilm, set_bilm

from ..conftest import random_bilm

ATOL = 1e-5


def _model(bilm=None, *, max_window=200, batch_size=32, max_batch_items=1024, trainable=False):
    return ElmoBiLM(
        bilm if bilm is not None else random_bilm(),
        max_window=max_window,
        batch_size=batch_size,
        max_batch_items=max_batch_items,
        trainable=trainable,
    )


def _words(n, seed=0):
    rng = np.random.default_rng(seed)
    return ["".join(rng.choice(list("abcdefgh.,'"), size=rng.integers(1, 8))) for _ in range(n)]


def test_sentences_run_separately(tiny_bilm, tiny_sentences):
    vocab = Vocab()
    first, second = tiny_sentences[0], tiny_sentences[2]
    starts = [i in (0, len(first)) for i in range(len(first) + len(second))]
    doc = Doc(vocab, words=first + second, sent_starts=starts)
    [out] = _model(tiny_bilm).predict([doc])
    expected = np.concatenate(tiny_bilm.embed([first, second]), axis=1)
    assert out.segments == ((0, len(first)), (len(first), len(doc)))
    assert out.layers.shape == (3, len(doc), 32)
    np.testing.assert_allclose(out.layers, expected, atol=ATOL)


def test_window_edges_cut_context(tiny_bilm):
    words = _words(45)
    [out] = _model(tiny_bilm, max_window=20).predict([Doc(Vocab(), words=words)])
    windows = tiny_bilm.embed([words[0:20], words[20:40], words[40:45]])
    np.testing.assert_allclose(out.layers, np.concatenate(windows, axis=1), atol=ATOL)
    [whole] = tiny_bilm.embed([words])
    # layer 0 is context free; the LSTM layers differ next to a window edge
    np.testing.assert_allclose(out.layers[0], whole[0], atol=ATOL)
    assert np.abs(out.layers[1:, 19] - whole[1:, 19]).max() > 1e-3


def test_output_independent_of_batch_mates_and_batch_caps(tiny_bilm, tiny_sentences):
    vocab = Vocab()
    docs = [Doc(vocab, words=s) for s in tiny_sentences] + [Doc(vocab, words=[])]
    alone = [_model(tiny_bilm).predict([doc])[0].layers for doc in docs]
    for batch_size, max_batch_items in [(32, 1024), (3, None), (1, 1), (8, 40)]:
        outs = _model(tiny_bilm, batch_size=batch_size, max_batch_items=max_batch_items).predict(docs)
        for a, out in zip(alone, outs):
            np.testing.assert_allclose(out.layers, a, atol=ATOL)
    assert alone[-1].shape == (3, 0, 32)


def test_set_bilm_replaces_shape(tiny_bilm):
    model = _model()
    assert model.get_dim("nO") == 16
    set_bilm(model, tiny_bilm)
    assert get_bilm(model) is tiny_bilm
    assert model.get_dim("nO") == 32 and model.attrs["n_layers"] == 3
    [out] = model.predict([Doc(Vocab(), words=["a", "b"])])
    assert out.layers.shape == (3, 2, 32)


def test_stateful_bilm_refused():
    bilm = random_bilm()
    bilm.stateful = True
    with pytest.raises(ValueError, match="stateless"):
        _model(bilm)


def test_frozen_model_keeps_no_graph():
    model = _model(trainable=False)
    docs = [Doc(Vocab(), words=_words(7))]
    outs, backprop = model.begin_update(docs)
    assert backprop([np.ones_like(o.layers) for o in outs]) == []
    assert all(p.grad is None for p in get_bilm(model).parameters())


def test_trainable_gradient_matches_torch_autograd():
    bilm = random_bilm(seed=3)
    model = _model(bilm, max_window=6, batch_size=2, trainable=True)
    vocab = Vocab()
    word_lists = [_words(9, seed=1), _words(4, seed=2), []]
    docs = [Doc(vocab, words=w) for w in word_lists]
    outs, backprop = model.begin_update(docs)
    rng = np.random.default_rng(0)
    d_layers = [rng.normal(size=o.layers.shape).astype("float32") for o in outs]
    backprop(d_layers)
    got = {name: p.grad.clone() for name, p in bilm.named_parameters()}

    # the same loss computed directly in torch: sum over windows of <layers, d_layers>
    bilm.zero_grad()
    total = 0.0
    for words, d in zip(word_lists, d_layers):
        for start in range(0, len(words), 6):
            window = words[start : start + 6]
            ids, lengths = batch_char_ids([window])
            layers = bilm(torch.from_numpy(ids), torch.from_numpy(lengths)).layers[:, 0, 1:-1]
            total = total + (layers * torch.from_numpy(d[:, start : start + len(window)])).sum()
    total.backward()
    for name, p in bilm.named_parameters():
        torch.testing.assert_close(got[name], p.grad, atol=1e-5, rtol=1e-4, msg=name)
    assert any(float(g.abs().sum()) > 0 for g in got.values())
