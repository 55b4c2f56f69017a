"""The char-CNN cache: hits give the encoder's results, it forgets changed weights, stays bounded, and is thread-safe."""
import torch

from spacy_elmo.bilm import batch_char_ids
from spacy_elmo.fast import optimize_for_inference

from ..conftest import random_bilm
from ..bilm.sentences import SENTENCES, layers


def test_char_cache_hits_and_results_match():
    """Bitwise: with exact=True the misses are encoded in the same batch of distinct tokens as the
    plain model's, and a hit returns the stored row."""
    bilm = random_bilm(seed=5)
    expected = layers(bilm).layers
    optimize_for_inference(bilm, char_cache_size=1000, exact=True)
    first = layers(bilm).layers
    cache = bilm.runner.char_cache
    assert cache.hits == 0 and cache.misses > 0
    second = layers(bilm).layers
    assert cache.hits == cache.misses  # every distinct token of the second call was cached
    torch.testing.assert_close(first, expected, atol=0, rtol=0)
    torch.testing.assert_close(second, expected, atol=0, rtol=0)


def test_char_cache_forgets_when_weights_change():
    bilm = optimize_for_inference(random_bilm(seed=6), char_cache_size=1000)
    layers(bilm)
    with torch.no_grad():
        bilm.token_encoder.highway.transform[0].weight.mul_(1.5)
    reference = random_bilm(seed=6)
    with torch.no_grad():
        reference.token_encoder.highway.transform[0].weight.mul_(1.5)
    torch.testing.assert_close(layers(bilm).layers[0], layers(reference).layers[0], atol=1e-6, rtol=0)


def test_char_cache_unused_when_training_or_with_grad():
    bilm = optimize_for_inference(random_bilm(seed=7), char_cache_size=1000)
    layers(bilm)
    cache = bilm.runner.char_cache
    assert len(cache) > 0
    ids, lengths = batch_char_ids(SENTENCES[:2])
    out = bilm(torch.from_numpy(ids), torch.from_numpy(lengths))  # eval mode, autograd on
    out.layers.sum().backward()
    assert bilm.token_encoder.char_embedding.weight.grad is not None
    assert cache.hits == 0
    bilm.train()
    layers(bilm)  # training mode, autograd off
    assert cache.hits == 0
    optimizer = torch.optim.SGD(bilm.parameters(), lr=0.1)
    optimizer.step()  # the gradients above change the encoder's weights in place
    bilm.eval()
    reference = random_bilm(seed=7)
    reference.load_state_dict(bilm.state_dict())
    torch.testing.assert_close(layers(bilm).layers, layers(reference).layers, atol=1e-5, rtol=0)
    assert cache.hits == 0  # refilled from scratch: nothing from before the step was reused


def test_char_cache_is_bounded_and_vocab_fill_stays():
    bilm = optimize_for_inference(random_bilm(seed=8), char_cache_size=4)
    layers(bilm)
    assert len(bilm.runner.char_cache) == 4
    optimize_for_inference(bilm, char_cache_size=5, vocab=["the", "the", "<S>", "bank", ".", "rates", "river"])
    cache = bilm.runner.char_cache
    assert len(cache) == 5
    layers(bilm)
    # <S> and </S> come first (every sentence has them), then "the", "bank", "." (repeats take no
    # slot); nothing else admitted
    assert len(cache) == 5 and cache.hits == 5
    optimize_for_inference(bilm, char_cache_size=1, vocab=["the"])
    assert len(bilm.runner.char_cache) == 1
    layers(bilm)
    assert bilm.runner.char_cache.hits == 1  # <S>


def test_char_cache_copies_and_threads():
    """Threads sharing one cache get the single-threaded outputs up to rounding.

    Not bitwise: which tokens hit the (tiny, constantly evicting) cache depends on how the
    threads interleave, and a missed token is encoded in a batch of another shape, which
    may round differently (one float32 ulp on some CPUs). A race in the cache would instead
    hand a token another token's encoding or a half-written row: errors of the size of the
    activations, checked below to be far above the tolerance.
    """
    import copy
    import threading

    bilm = optimize_for_inference(random_bilm(seed=10), char_cache_size=3)  # small: constant eviction
    expected = layers(bilm).layers
    tolerance = {"atol": 1e-5, "rtol": 1e-5}
    # distinct tokens' encodings (layer 0) differ by far more than the tolerance, so a row that
    # went to the wrong token fails the comparison
    rows = {}
    for i, sentence in enumerate(SENTENCES):
        for j, token in enumerate(sentence):
            rows.setdefault(token, expected[0, i, j + 1])  # position 0 is <S>
    encodings = torch.stack(list(rows.values()))
    gaps = (encodings[:, None] - encodings[None]).abs().amax(-1)
    assert gaps[~torch.eye(len(rows), dtype=torch.bool)].min() > 1000 * tolerance["atol"]
    twin = copy.deepcopy(bilm)  # parameters are copied one by one: the directions run unpaired
    torch.testing.assert_close(layers(twin).layers, expected, atol=1e-6, rtol=0)
    assert len(twin.runner.char_cache) == 3
    errors = []

    def work():
        try:
            for _ in range(5):
                torch.testing.assert_close(layers(bilm).layers, expected, **tolerance)
        except Exception as err:  # reported below, in the main thread
            errors.append(err)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == [] and len(bilm.runner.char_cache) == 3
