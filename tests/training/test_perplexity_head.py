"""Perplexity of a model with its own (published) head: chunked like the whole softmax, the
carried-state definition against a computation written out by hand, both against bilm-tf's graph."""
import math

import numpy as np
import pytest
import torch

from spacy_elmo.training.head import load_scoring_lm
from spacy_elmo.training.perplexity import evaluate_perplexity

from ..published_head import bilm_tf_reference, write_published_head

SENTENCES = [
    ["the", "cat", "sees", "a", "bird", "."],
    ["a", "big", "dog", "likes", "fish"],
    ["red", "zebra"],  # a word outside the head's vocabulary: <UNK>
    ["small"],
]


@pytest.fixture()
def scoring(tmp_path):
    return load_scoring_lm(write_published_head(tmp_path / "pub"))


def test_chunked_and_whole_softmax_give_the_same_perplexity(scoring):
    lm, vocab, _ = scoring
    whole = evaluate_perplexity(lm, SENTENCES, vocab)
    lm.softmax.chunk_size = 4
    chunked = evaluate_perplexity(lm, SENTENCES, vocab)
    for name in ("forward", "backward", "mean"):
        assert getattr(chunked, name) == pytest.approx(getattr(whole, name), rel=1e-5)
    assert whole.n_forward == sum(len(s) + 1 for s in SENTENCES) and whole.n_oov == 1


def _nll(lm, hidden, targets):
    log_probs = torch.log_softmax(hidden @ lm.softmax.weight.t() + lm.softmax.bias, dim=-1)
    return float(-log_probs[torch.arange(len(targets)), torch.as_tensor(targets)].sum())


def test_carried_state_differs_from_fresh_and_matches_one_stream_run_by_hand(scoring):
    lm, vocab, _ = scoring
    fresh = evaluate_perplexity(lm, SENTENCES, vocab)
    carried = evaluate_perplexity(lm, SENTENCES, vocab, carry_state=True)
    assert carried.n_forward == fresh.n_forward and carried.n_backward == fresh.n_backward
    assert abs(carried.forward - fresh.forward) > 1e-3 and abs(carried.backward - fresh.backward) > 1e-3
    # by hand: the forward LM reads <S> w1 .. wn of every sentence as one row; the backward LM reads
    # </S> wn .. w1 of every sentence in turn, i.e. one row w1 .. wn </S> per sentence, last sentence first
    bilm, width = lm.bilm, lm.bilm.config.projection_dim
    forward_tokens, forward_targets, backward_tokens, backward_targets = [], [], [], []
    for tokens in SENTENCES:
        ids = vocab.encode(tokens).tolist()
        forward_tokens += ["<S>", *tokens]
        forward_targets += ids[1:]
    for tokens in reversed(SENTENCES):
        ids = vocab.encode(tokens).tolist()
        backward_tokens += [*tokens, "</S>"]
        backward_targets += ids[:-1]
    with torch.no_grad():
        for tokens, targets, half, result, count in (
            (forward_tokens, forward_targets, slice(0, width), carried.forward_nll, carried.n_forward),
            (backward_tokens, backward_targets, slice(width, 2 * width), carried.backward_nll, carried.n_backward),
        ):
            ids, lengths = bilm.batch_ids([tokens], boundaries=False)
            top = bilm(torch.from_numpy(ids), torch.from_numpy(lengths)).layers[-1][0, :, half]
            assert len(targets) == count
            assert _nll(lm, top, targets) == pytest.approx(result, rel=1e-5)
    # and fresh is each sentence alone, the same way
    expected = 0.0
    with torch.no_grad():
        for tokens in SENTENCES:
            ids, lengths = bilm.batch_ids([tokens])
            top = bilm(torch.from_numpy(ids), torch.from_numpy(lengths)).layers[-1][0, :, :width]
            expected += _nll(lm, top[:-1], vocab.encode(tokens)[1:])
    assert expected == pytest.approx(fresh.forward_nll, rel=1e-5)
    assert math.isfinite(carried.mean) and np.isfinite(fresh.mean)


@pytest.mark.parametrize("state", ["fresh", "carried"])
def test_fresh_and_carried_perplexity_are_bilm_tfs(state):
    """bilm-tf's test-time graph, one token a step (tests/data/bilm_tf): the summed NLL of each
    direction, and for the carried state the perplexity bilm-tf's own ``test`` returned."""
    folder, reference, _ = bilm_tf_reference()
    lm, vocab, _ = load_scoring_lm(folder)
    sentences = [s.split() for s in reference["sentences"]]
    result = evaluate_perplexity(lm, sentences, vocab, carry_state=state == "carried")
    expected = reference["token_nll"][state]
    assert result.n_forward == len(expected["forward"]) and result.n_backward == len(expected["backward"])
    assert result.forward_nll == pytest.approx(sum(expected["forward"]), rel=1e-5)
    assert result.backward_nll == pytest.approx(sum(expected["backward"]), rel=1e-5)
    if state == "carried":
        assert result.mean == pytest.approx(reference["test_perplexity_carried"], rel=1e-4)
