"""The frozen biLM's cache of layers per segment (``FrozenCache`` in layers/bilm_model.py)."""
import copy

import numpy as np
import pytest
import torch
from spacy.tokens import Doc
from spacy.vocab import Vocab

from spacy_elmo.bilm import BiLM
from spacy_elmo.fast.precision import reduce_precision
from spacy_elmo.layers import ElmoBiLM, get_bilm, set_bilm
from spacy_elmo.layers.bilm_model import CACHE_ATTR, clear_frozen_cache

from ..conftest import random_bilm
from ..training_runs import CONFIGS, make_data, train

ATOL = 1e-5


def _model(bilm=None, *, cache_mb=1.0, trainable=False, **settings):
    return ElmoBiLM(
        bilm if bilm is not None else random_bilm(),
        max_window=settings.get("max_window", 200),
        batch_size=settings.get("batch_size", 32),
        max_batch_items=settings.get("max_batch_items", 1024),
        trainable=trainable,
        frozen_cache_mb=cache_mb,
    )


def _docs(n, seed=0, length=(3, 9)):
    rng = np.random.default_rng(seed)
    vocab = Vocab()
    words = lambda k: ["".join(rng.choice(list("abcdefgh.,'"), size=rng.integers(1, 6))) for _ in range(k)]
    return [Doc(vocab, words=words(rng.integers(*length))) for _ in range(n)]


@pytest.fixture()
def bilm_rows(monkeypatch):
    """Counts the sentences (rows) that go through any BiLM's forward pass."""
    counter = {"rows": 0, "calls": 0}
    forward = BiLM.forward

    def counting(self, ids, *args, **kwargs):
        counter["rows"] += ids.shape[0]
        counter["calls"] += 1
        return forward(self, ids, *args, **kwargs)

    monkeypatch.setattr(BiLM, "forward", counting)
    return counter


def _fresh(bilm, docs):
    return [out.layers for out in _model(bilm, cache_mb=0).predict(docs)]


def test_hits_equal_fresh_computation_and_are_copies(bilm_rows):
    bilm = random_bilm()
    docs = _docs(12)
    # two-sentence Docs: cached segments are joined with ones run in the same call
    vocab = docs[0].vocab
    joined = Doc(vocab, words=[t.text for t in docs[0]] + ["new", "words"] * 3, sent_starts=None)
    joined[len(docs[0])].is_sent_start = True
    expected = _fresh(bilm, docs + [joined])
    model = _model(bilm)
    first = model.predict(docs)
    rows = bilm_rows["rows"]
    second = model.predict(docs[::-1])[::-1]
    assert bilm_rows["rows"] == rows  # every segment came from the cache
    third = model.predict([joined])
    assert bilm_rows["rows"] == rows + 1  # only the new sentence ran
    cache = model.attrs[CACHE_ATTR]
    assert cache.hits == len(docs) + 1 and len(cache) == len(docs) + 1
    for got, want in zip([o.layers for o in first + second + third], expected[:-1] * 2 + expected[-1:]):
        np.testing.assert_allclose(got, want, atol=ATOL)
    # outputs are the caller's own: writing into them leaves the cache as it was
    second[0].layers[:] = 99.0
    np.testing.assert_allclose(model.predict(docs[:1])[0].layers, expected[0], atol=ATOL)
    # training-time passes of a frozen biLM use it too
    outs, backprop = model.begin_update(docs)
    assert bilm_rows["rows"] == rows + 1 and backprop([o.layers for o in outs]) == []


def test_bound_is_respected_least_recently_used_go_first(bilm_rows):
    bilm = random_bilm()
    docs = _docs(40, length=(5, 6))  # 5 tokens: 3 layers x 5 x 16 floats = 960 bytes each
    model = _model(bilm, cache_mb=10 * 960 / 2**20)
    cache = model.attrs[CACHE_ATTR]
    for doc in docs:
        model.predict([doc])
        assert cache.n_bytes <= cache.max_bytes
    assert len(cache) == 10
    rows = bilm_rows["rows"]
    model.predict(docs[-10:])
    assert bilm_rows["rows"] == rows
    model.predict(docs[:1])
    assert bilm_rows["rows"] == rows + 1
    # a segment larger than the whole cache is not stored
    [long] = _docs(1, length=(60, 61))
    model.predict([long])
    assert cache.n_bytes <= cache.max_bytes and len(cache) == 10


def test_new_weights_invalidate(bilm_rows):
    docs = _docs(6)
    first, second = random_bilm(seed=0), random_bilm(seed=1)
    model = _model(first)
    model.predict(docs)
    set_bilm(model, second)
    for got, want in zip(model.predict(docs), _fresh(second, docs)):
        np.testing.assert_allclose(got.layers, want, atol=ATOL)
    # weights changed in place, as an optimizer or load_state_dict does
    with torch.no_grad():
        next(second.parameters()).mul_(1.5)
    rows = bilm_rows["rows"]
    for got, want in zip(model.predict(docs), _fresh(second, docs)):
        np.testing.assert_allclose(got.layers, want, atol=ATOL)
    assert bilm_rows["rows"] > rows
    # a reduced-precision mode changes outputs without changing the weights
    rows = bilm_rows["rows"]
    assert reduce_precision(second, "fp16") > 0
    for got, want in zip(model.predict(docs), _fresh(second, docs)):
        np.testing.assert_allclose(got.layers, want, atol=ATOL)
    assert bilm_rows["rows"] > rows
    reduce_precision(second, "fp32")
    # writes torch does not see need the explicit call
    next(second.parameters()).data.numpy()[...] *= 0.5
    clear_frozen_cache(model)
    assert len(model.attrs[CACHE_ATTR]) == 0
    for got, want in zip(model.predict(docs), _fresh(second, docs)):
        np.testing.assert_allclose(got.layers, want, atol=ATOL)


def test_trainable_bilm_never_uses_it(bilm_rows):
    docs = _docs(5)
    model = _model(trainable=True)
    for _ in range(2):
        model.predict(docs)
        outs, backprop = model.begin_update(docs)
        backprop([np.ones_like(o.layers) for o in outs])
    assert bilm_rows["rows"] == 4 * len(docs) and len(model.attrs[CACHE_ATTR]) == 0
    # frozen again after training: nothing stored while trainable is reused
    model.attrs["trainable"] = False
    model.predict(docs)
    assert bilm_rows["rows"] == 5 * len(docs)


def test_disabled_and_copies_start_empty(bilm_rows):
    docs = _docs(4)
    off = _model(cache_mb=0)
    off.predict(docs)
    off.predict(docs)
    assert bilm_rows["rows"] == 2 * len(docs) and len(off.attrs[CACHE_ATTR]) == 0
    with pytest.raises(ValueError, match="frozen_cache_mb"):
        _model(cache_mb=-1)
    model = _model()
    model.predict(docs)
    for other in (model.copy(), copy.deepcopy(model), _model().from_bytes(model.to_bytes())):
        cache = other.attrs[CACHE_ATTR]
        assert len(cache) == 0 and cache.max_bytes == model.attrs[CACHE_ATTR].max_bytes
        for got, want in zip(other.predict(docs), _fresh(get_bilm(other), docs)):
            np.testing.assert_allclose(got.layers, want, atol=ATOL)


@pytest.mark.slow
def test_spacy_train_runs_a_frozen_bilm_less(tmp_path, bilm_rows):
    data = make_data(tmp_path)
    rows = {}
    for cache_mb in (0, 64):
        bilm_rows["rows"] = 0
        nlp = train(
            CONFIGS / "tagger-elmo.cfg",
            data,
            tmp_path / f"cache-{cache_mb}",
            **{"components.elmo.model.frozen_cache_mb": cache_mb, "training.eval_frequency": 10},
        )
        rows[cache_mb] = bilm_rows["rows"]
        assert nlp.get_pipe("elmo").model.attrs[CACHE_ATTR].max_bytes == cache_mb * 2**20
    # 40 steps over 40 training sentences and 4 evaluations of 20 dev sentences: with the cache
    # each sentence runs about once (plus loading and scoring the saved models)
    assert rows[64] < rows[0] / 2
