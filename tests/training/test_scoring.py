"""``load_lm``: a model with its softmax as a language model in Python (perplexity, per-token
log-probabilities, substitutes), held to bilm-tf's own TensorFlow outputs."""
import numpy as np
import pytest

import spacy_elmo
from spacy_elmo.io.lm_head import UNK_TOKEN
from spacy_elmo.training.scoring import load_lm

from ..published_head import bilm_tf_reference, write_published_head


def _split(values, lengths):
    return np.split(np.asarray(values), np.cumsum(lengths)[:-1])


@pytest.mark.parametrize("state", ["fresh", "carried"])
def test_logprobs_are_bilm_tfs_per_token_log_probabilities(state):
    """bilm-tf's test-time graph scored one token a step (tests/data/bilm_tf/reference.json): the
    forward NLLs of w1 .. </S> and the backward NLLs of wn .. w1, <S> of each sentence."""
    folder, reference, _ = bilm_tf_reference()
    sentences = [s.split() for s in reference["sentences"]]
    found = load_lm(folder).logprobs(sentences, carry_state=state == "carried")
    lengths = [len(s) + 1 for s in sentences]
    theirs = reference["token_nll"][state]
    for ours, forward, backward in zip(found, _split(theirs["forward"], lengths), _split(theirs["backward"], lengths)):
        np.testing.assert_allclose(ours.forward, -forward, atol=1e-4, rtol=0)
        np.testing.assert_allclose(ours.backward, -backward[::-1], atol=1e-4, rtol=0)  # theirs: reading order


def test_carried_logprobs_differ_from_fresh_after_the_first_sentence():
    folder, reference, _ = bilm_tf_reference()
    sentences = [s.split() for s in reference["sentences"]]
    lm = load_lm(folder)
    fresh, carried = lm.logprobs(sentences), lm.logprobs(sentences, carry_state=True)
    np.testing.assert_allclose(fresh[0].forward, carried[0].forward, atol=1e-6)
    assert not np.allclose(fresh[1].forward, carried[1].forward, atol=1e-4)


@pytest.mark.parametrize("carry_state", [False, True])
def test_perplexity_is_the_exponent_of_the_mean_logprob(tmp_path, carry_state):
    lm = load_lm(write_published_head(tmp_path / "pub"))
    sentences = [["the", "cat", "sees", "a", "bird", "."], ["red", "zebra"], ["small"]]
    perplexity = lm.perplexity(sentences, carry_state=carry_state)
    found = lm.logprobs(sentences, carry_state=carry_state)
    forward = np.concatenate([s.forward for s in found])
    backward = np.concatenate([s.backward for s in found])
    assert perplexity.n_forward == len(forward) == sum(len(s) + 1 for s in sentences)
    assert perplexity.forward == pytest.approx(float(np.exp(-forward.mean())), rel=1e-5)
    assert perplexity.backward == pytest.approx(float(np.exp(-backward.mean())), rel=1e-5)
    assert all(s.words.shape == (len(s.tokens),) for s in found)


def test_fresh_logprobs_do_not_depend_on_the_batch(tmp_path):
    lm = load_lm(write_published_head(tmp_path / "pub"))
    sentences = [["the", "cat", "sees", "a", "bird", "."], ["small"], ["a", "big", "dog"]]
    together = lm.logprobs(sentences, batch_size=3)
    alone = [lm.logprobs([s])[0] for s in sentences]
    for a, b in zip(together, alone):
        np.testing.assert_allclose(a.forward, b.forward, atol=1e-5)
        np.testing.assert_allclose(a.backward, b.backward, atol=1e-5)


def test_substitutes_are_words_unless_asked_for_every_entry(tmp_path):
    lm = load_lm(write_published_head(tmp_path / "pub"))
    sentence = [["red", "zebra", "sees", "a", "bird"]]
    size = len(lm.head)
    words = lm.substitutes(sentence, top=size - 3)[0]
    assert all(UNK_TOKEN not in {s.word for s in t.combined} | {s.word for s in t.forward} for t in words)
    assert all({"<S>", "</S>"}.isdisjoint(s.word for s in t.combined) for t in words)
    every = lm.substitutes(sentence, top=size, exclude=())[0]
    offered = {s.word for t in every for s in t.combined}
    assert {UNK_TOKEN, "<S>", "</S>"} <= offered
    boundaries = lm.substitutes(sentence, top=size - 1, exclude=[UNK_TOKEN])[0]
    assert {"<S>", "</S>"} <= {s.word for t in boundaries for s in t.backward}


@pytest.mark.parametrize("bad, message", [([], "no sentences"), ([["a"], []], "sentence 1 has no tokens"),
                                          ("a sentence", "tokenized"), (["a", "b"], "tokenized")])
def test_bad_input_is_refused_with_a_message(tmp_path, bad, message):
    lm = load_lm(write_published_head(tmp_path / "pub"))
    with pytest.raises((ValueError, TypeError), match=message):
        lm.logprobs(bad)


def test_the_package_offers_load_lm():
    assert spacy_elmo.load_lm is load_lm


def test_a_sentence_longer_than_a_window_gets_its_substitutes_window_by_window(tmp_path):
    from spacy_elmo.bilm.batching import MAX_WINDOW

    lm = load_lm(write_published_head(tmp_path / "pub"))
    words = "the cat sees a big bird .".split()
    long = [words[i % len(words)] for i in range(MAX_WINDOW + 30)]
    steps = []
    lm.lm.bilm.register_forward_pre_hook(lambda module, args: steps.append(args[0].shape[1]))
    [found] = lm.substitutes([long], top=3)
    assert max(steps) <= MAX_WINDOW + 2
    assert [t.position for t in found] == list(range(len(long))) and [t.token for t in found] == long
    [tail] = lm.substitutes([long[MAX_WINDOW:]], top=3)
    for alone, windowed in zip(tail, found[MAX_WINDOW:]):  # the last window as a sentence of its own, to 1e-5
        assert [s.word for s in windowed.combined] == [s.word for s in alone.combined]
        assert [s.log_prob for s in windowed.combined] == pytest.approx([s.log_prob for s in alone.combined], abs=1e-5)


def test_load_lm_puts_the_model_and_the_heads_own_softmax_on_the_device_asked_for():
    """``substitutes`` multiplies with the head's softmax: it must move with the model (on a GPU it
    stayed on the CPU). The meta device stands in for cuda: no tensor of either may stay behind."""
    lm = load_lm(device="meta")
    tensors = [*lm.lm.parameters(), *lm.lm.buffers(), *lm.head.softmax.parameters()]
    assert tensors and {t.device.type for t in tensors} == {"meta"}
    assert lm.bilm.device.type == "meta"
