"""The frozen biLM's cache of layers per segment (``FrozenCache`` in layers/bilm_model.py)."""
import copy
import warnings

import numpy as np
import pytest
import torch
from spacy.tokens import Doc
from spacy.vocab import Vocab

from spacy_elmo.bilm import BiLM
from spacy_elmo.fast.precision import reduce_precision
from spacy_elmo.layers import ElmoBiLM, get_bilm, set_bilm
from spacy_elmo.layers.bilm_model import CACHE_ATTR, clear_frozen_cache
from spacy_elmo.layers.frozen_cache import available_memory, cgroup_headroom, segment_rank

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


def _rank(doc):
    return segment_rank(tuple(token.text for token in doc))


def test_a_full_cache_keeps_the_lowest_ranked_segments_until_one_comes_back_more_often(bilm_rows):
    bilm = random_bilm()
    docs = _docs(40, length=(5, 6))  # 5 tokens: 3 layers x 5 x 16 floats = 960 bytes each
    assert len({_rank(doc) for doc in docs}) == len(docs)
    model = _model(bilm, cache_mb=10 * 960 / 2**20)
    cache = model.attrs[CACHE_ATTR]
    for doc in docs:
        model.predict([doc])
        assert cache.n_bytes <= cache.max_bytes
    # whatever the order of a scan, the cache ends with the ten segments of lowest rank
    by_rank = sorted(docs, key=_rank)
    kept, others = by_rank[:10], by_rank[10:]
    assert len(cache) == 10 and cache.refused > 0
    rows = bilm_rows["rows"]
    model.predict(kept)
    assert bilm_rows["rows"] == rows
    reordered = _model(bilm, cache_mb=10 * 960 / 2**20)
    for doc in docs[::-1]:
        reordered.predict([doc])
    rows = bilm_rows["rows"]
    reordered.predict(kept)
    assert bilm_rows["rows"] == rows
    # a segment looked up twice more than the highest ranked entry takes its place, whatever its rank
    outsider, highest = others[-1], kept[-1]
    with pytest.warns(UserWarning, match="frozen_cache_mb"):
        for _ in range(3):
            model.predict([outsider])
    assert bilm_rows["rows"] == rows + 3 and len(cache) == 10
    model.predict([outsider] + kept[:-1])
    assert bilm_rows["rows"] == rows + 3
    model.predict([highest])
    assert bilm_rows["rows"] == rows + 4
    # a segment larger than the whole cache is not stored
    [long] = _docs(1, length=(60, 61))
    model.predict([long])
    assert cache.n_bytes <= cache.max_bytes and len(cache) == 10


def test_a_dev_set_evaluated_first_takes_no_more_than_its_share(bilm_rows):
    # spacy train evaluates at step 0: a cache that kept what came first would hold the dev set
    # and let the training epochs hit little
    bilm = random_bilm()
    train, dev = _docs(160, seed=11, length=(4, 12)), _docs(40, seed=12, length=(4, 12))
    model = _model(bilm, cache_mb=0)
    working_set = sum(out.layers.nbytes for out in model.predict(train + dev))
    model = _model(bilm, cache_mb=working_set / 4 / 2**20)
    cache = model.attrs[CACHE_ATTR]
    rng = np.random.default_rng(1)
    hits = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for epoch in range(2):
            model.begin_update(train[:8])
            model.predict(dev)  # the evaluation at the start of each epoch
            order = rng.permutation(len(train))
            before = cache.hits
            for start in range(0, len(order), 8):
                model.begin_update([train[i] for i in order[start : start + 8]])
            hits.append((cache.hits - before) / len(train))
    assert hits[1] >= 0.2
    assert cache.n_bytes <= cache.max_bytes


def test_epochs_over_four_times_the_bound_hit_about_a_quarter_and_warn_once_with_the_size(bilm_rows):
    bilm = random_bilm()
    docs = _docs(120, seed=3, length=(4, 12))
    model = _model(bilm, cache_mb=0)
    working_set = sum(out.layers.nbytes for out in model.predict(docs))
    tokens = sum(len(doc) for doc in docs)
    model = _model(bilm, cache_mb=working_set / 4 / 2**20)
    cache = model.attrs[CACHE_ATTR]
    rng = np.random.default_rng(0)
    hits = []
    with pytest.warns(UserWarning) as caught:
        for epoch in range(3):
            order = rng.permutation(len(docs))  # spaCy shuffles the training set every epoch
            before = cache.hits
            for start in range(0, len(order), 8):
                model.begin_update([docs[i] for i in order[start : start + 8]])
            hits.append((cache.hits - before) / len(docs))
    assert hits[0] == 0 and hits[1] >= 0.2 and hits[2] >= 0.2
    assert cache.n_bytes <= cache.max_bytes
    messages = [str(w.message) for w in caught if "frozen_cache_mb" in str(w.message)]
    assert len(messages) == 1
    # it names the corpus it has seen and the bound that would hold it, at this biLM's bytes a token
    assert f"{len(docs)} distinct segments seen so far ({tokens} tokens)" in messages[0]
    assert "3 layers x 16 values x 4 bytes" in messages[0]
    assert f"frozen_cache_mb = {-(-working_set // 2**20)} " in messages[0]


def test_without_a_bound_it_takes_a_quarter_of_the_available_memory_once_training_uses_it(bilm_rows):
    bilm = random_bilm()
    model = _model(bilm, cache_mb=None)
    cache = model.attrs[CACHE_ATTR]
    assert cache.enabled and cache.max_bytes == 0  # decided when first used, the weights loaded
    available = available_memory()
    docs = _docs(3)
    # prediction alone (a service, a corpus embedded once) stores nothing: memory stays flat
    model.predict(docs)
    model.predict(docs)
    assert 0.2 * available <= cache.max_bytes <= 0.3 * available and len(cache) == 0 and cache.n_bytes == 0
    rows = bilm_rows["rows"]
    # a training pass (spacy train's update) turns it on, for the epochs and the dev evaluations after it
    model.begin_update(docs)
    model.predict(docs)
    assert len(cache) == 3 and bilm_rows["rows"] == rows + 3
    assert _model(bilm, cache_mb=None).from_bytes(model.to_bytes()).attrs[CACHE_ATTR].bound is None


def test_an_explicit_bound_stores_at_prediction_too(bilm_rows):
    model = _model(random_bilm(), cache_mb=1)
    docs = _docs(3)
    model.predict(docs)
    rows = bilm_rows["rows"]
    model.predict(docs)
    assert len(model.attrs[CACHE_ATTR]) == 3 and bilm_rows["rows"] == rows


def _cgroup(root, version, limit, usage, inactive):
    folder = root if version == 2 else root / "memory"
    folder.mkdir(parents=True)
    names = ("memory.max", "memory.current", "inactive_file") if version == 2 else (
        "memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file")
    (folder / names[0]).write_text(f"{limit}\n")
    (folder / names[1]).write_text(f"{usage}\n")
    (folder / "memory.stat").write_text(f"anon {usage - inactive}\n{names[2]} {inactive}\n")
    return root


@pytest.mark.parametrize("version", [1, 2])
def test_a_containers_memory_limit_bounds_the_available_memory(tmp_path, version):
    # MemAvailable is the host's in a container: the cgroup's limit less its usage (the page cache it
    # can drop not counted) is what the cache may take a share of
    mb = 2**20
    root = _cgroup(tmp_path / "limited", version, 64 * mb, 48 * mb, 8 * mb)
    assert cgroup_headroom(root) == 24 * mb
    assert available_memory(root) == 24 * mb
    unlimited = "max" if version == 2 else 9223372036854771712
    assert cgroup_headroom(_cgroup(tmp_path / "unlimited", version, unlimited, 48 * mb, 8 * mb)) is None
    assert cgroup_headroom(tmp_path / "none") is None
    assert cgroup_headroom(_cgroup(tmp_path / "full", version, 64 * mb, 80 * mb, 0)) == 0


def test_a_corpus_repeating_some_sentences_warns_in_its_second_epoch_with_the_whole_corpus(bilm_rows):
    # CoNLL-2003 repeats its datelines: a repeat in the first epoch, when a fraction of the corpus
    # has been seen, would name a size too small for it
    bilm = random_bilm()
    distinct = _docs(60, seed=5, length=(4, 12))
    corpus = [doc for i, doc in enumerate(distinct) for doc in ([doc, distinct[0]] if i % 10 == 9 else [doc])]
    per_token = sum(out.layers.nbytes for out in _model(bilm, cache_mb=0).predict(distinct[:1])) // len(distinct[0])
    model = _model(bilm, cache_mb=per_token * 20 / 2**20)  # about a fifth of the corpus
    cache = model.attrs[CACHE_ATTR]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for start in range(0, len(corpus), 8):
            model.begin_update(corpus[start : start + 8])
        assert cache.refused and not [w for w in caught if "frozen_cache_mb" in str(w.message)]
        for start in range(0, len(corpus), 8):
            model.begin_update(corpus[start : start + 8])
    messages = [str(w.message) for w in caught if "frozen_cache_mb" in str(w.message)]
    assert len(messages) == 1
    assert f"{len(distinct)} distinct segments seen so far ({sum(len(doc) for doc in distinct)} tokens)" in messages[0]
    assert "needs its training and dev tokens x" in messages[0]


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


def test_two_threads_at_once_keep_the_cache_whole_within_its_bound(monkeypatch):
    """A server's two lanes run the same model: lookups, stores, evictions and the counts' halving from
    several threads at once, switching threads as often as Python allows, leave the entries within the
    bound, each entry's bytes counted once, and every lookup answered with its own layers."""
    import sys
    import threading

    import numpy as np

    from spacy_elmo.layers import frozen_cache
    from spacy_elmo.layers.frozen_cache import FrozenCache

    monkeypatch.setattr(frozen_cache, "MIN_SAMPLE", 50)  # the counts halved every few hundred lookups
    cache = FrozenCache(bound=40 * 3 * 4 * 4)  # forty one-token segments of 3 layers x 4 values
    cache.note_pass(is_train=True)
    module = torch.nn.Linear(1, 1)
    cache.check(module, ("state",))
    errors = []
    LOOKUPS = 10_000

    def lane(seed):
        rng = np.random.default_rng(seed)
        try:
            for _ in range(LOOKUPS):
                key = (f"w{int(rng.zipf(1.3)) % 2000}",)
                found = cache.get(key)
                if found is not None:
                    assert found[0, 0, 0] == hash(key) % 1000, key
                else:
                    cache.put(key, np.full((3, 1, 4), hash(key) % 1000, dtype=np.float32))
        except Exception as err:  # noqa: BLE001 - any failure in a lane fails the test
            errors.append(err)

    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=lane, args=(seed,)) for seed in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(before)
    assert not errors, errors[:3]
    stored = [key for _, key in cache._by_rank if key in cache._entries]
    assert cache.n_bytes <= cache.max_bytes and cache.n_bytes == sum(cache._entries.cost_of(k) for k in set(stored))
    assert len(set(stored)) == len(cache) and cache.hits + cache.misses == 4 * LOOKUPS
