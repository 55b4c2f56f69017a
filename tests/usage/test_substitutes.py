"""Substitutes: the model's own softmax at each token, against a brute-force argmax over the
vocabulary and against bilm-tf's graph."""
import json

import pytest
import spacy
import torch
from typer.testing import CliRunner

from spacy_elmo.cli import app
from spacy_elmo.io.loading import load_lm_head
from spacy_elmo.training.scoring import load_lm
from spacy_elmo.usage.substitutes import NOT_WORDS, doc_substitutes, sentence_substitutes

from ..published_head import bilm_tf_reference, write_published_head

SENTENCES = [["the", "cat", "sees", "a", "bird", "."], ["a", "zebra"], ["fish"]]


@pytest.fixture(scope="module")
def bilm_tf():
    return bilm_tf_reference()


def _brute_force(bilm, head, tokens, exclude):
    """Every word's log-probability at every position, the whole matrix at once."""
    width = bilm.config.projection_dim
    ids, lengths = bilm.batch_ids([tokens])
    with torch.no_grad():
        top = bilm(torch.from_numpy(ids), torch.from_numpy(lengths)).layers[-1][0]
        logits = lambda h: torch.log_softmax(h @ head.softmax.weight.t() + head.softmax.bias, dim=-1)
        forward = logits(top[: len(tokens), :width])  # before each word
        backward = logits(top[2:, width:])  # after each word
    combined = (forward + backward) / 2
    for matrix in (forward, backward, combined):
        matrix[:, [head.index[w] for w in exclude]] = float("-inf")
    return forward, backward, combined


def test_substitutes_are_the_brute_force_best_words_of_each_direction_and_their_mean(tmp_path):
    bilm, head = load_lm_head(write_published_head(tmp_path / "pub"))
    head.softmax.chunk_size = 4  # several chunks over the 15 words
    found = sentence_substitutes(bilm, head, SENTENCES, top=4, exclude=["<S>", "</S>", "<UNK>"], batch_size=2)
    assert [[t.token for t in s] for s in found] == SENTENCES
    for tokens, subs in zip(SENTENCES, found):
        expected = _brute_force(bilm, head, tokens, ["<S>", "</S>", "<UNK>"])
        for i, token in enumerate(subs):
            assert token.position == i
            for name, matrix in zip(("forward", "backward", "combined"), expected):
                best = matrix[i].topk(4)
                got = getattr(token, name)
                assert [s.word for s in got] == [head.words[j] for j in best.indices], (name, i)
                torch.testing.assert_close(torch.tensor([s.log_prob for s in got]), best.values, rtol=1e-5, atol=1e-6)
    # words only unless asked: every word may be offered, never <S>, </S> or <UNK>
    words = len(head) - len(NOT_WORDS)
    offered = {s.word for sent in sentence_substitutes(bilm, head, SENTENCES, top=words) for t in sent for s in t.forward}
    assert offered == set(head.words) - set(NOT_WORDS)
    every = {s.word for sent in sentence_substitutes(bilm, head, SENTENCES, top=len(head), exclude=()) for t in sent
             for s in t.forward}
    assert every == set(head.words)


def test_every_way_to_ask_for_substitutes_offers_the_same_words_only_by_default(tmp_path):
    """sentence_substitutes, doc_substitutes, load_lm().substitutes and the command share one default."""
    model = write_published_head(tmp_path / "pub")
    bilm, head = load_lm_head(model)
    tokens = ["the", "cat", "sees", "a", "zebra", "."]
    words = len(head) - len(NOT_WORDS)
    [alone] = sentence_substitutes(bilm, head, [tokens], top=words)
    in_doc = doc_substitutes(spacy.blank("en")(" ".join(tokens)), bilm, head, top=words)
    [from_lm] = load_lm(model).substitutes([tokens], top=words)
    printed = CliRunner().invoke(app, ["substitutes", " ".join(tokens), "--model", str(model), "--top", str(words)])
    assert printed.exit_code == 0, printed.output
    from_command = [json.loads(line) for line in printed.stdout.splitlines()]
    for i, token in enumerate(alone):
        for name in ("forward", "backward", "combined"):
            offered = [s.word for s in getattr(token, name)]
            assert not set(offered) & set(NOT_WORDS)
            assert [s.word for s in getattr(in_doc[i], name)] == offered
            assert [s.word for s in getattr(from_lm[i], name)] == offered
            assert [s["word"] for s in from_command[i][name]] == offered


def test_the_doc_view_reads_each_sentence_alone_and_skips_whitespace(tmp_path):
    bilm, head = load_lm_head(write_published_head(tmp_path / "pub"))
    nlp = spacy.blank("en")
    nlp.add_pipe("sentencizer")
    doc = nlp("the cat sees a bird .  a zebra")
    found = doc_substitutes(doc, bilm, head, top=3)
    assert len(found) == len(doc) and found[6] is None  # the double space's token
    sentences = sentence_substitutes(bilm, head, [["the", "cat", "sees", "a", "bird", "."], ["a", "zebra"]], top=3)
    expected = [*sentences[0], *sentences[1]]
    kept = [(i, sub) for i, sub in enumerate(found) if sub is not None]
    assert [i for i, _ in kept] == [0, 1, 2, 3, 4, 5, 7, 8]
    for (i, sub), alone in zip(kept, expected):
        assert sub.position == i and sub.token == doc[i].text and sub.combined == alone.combined


def test_substitutes_are_bilm_tfs_log_probabilities_and_top_k(bilm_tf):
    """bilm-tf's own graph (tests/data/bilm_tf): every word offered, as its top_k ranks them."""
    folder, reference, arrays = bilm_tf
    bilm, head = load_lm_head(folder)
    sentences = [s.split() for s in reference["sentences"]]
    k = reference["top_k"]
    found = sentence_substitutes(bilm, head, sentences, top=k, exclude=())
    for index, (tokens, subs) in enumerate(zip(sentences, found)):
        for name in ("forward", "backward", "combined"):
            top_ids = [[head.index[s.word] for s in getattr(token, name)] for token in subs]
            assert top_ids == arrays[f"top_{name}_{index}"].tolist(), (index, name)
            values = torch.tensor([[s.log_prob for s in getattr(token, name)] for token in subs])
            expected = torch.from_numpy(arrays[f"{name}_{index}"]).gather(1, torch.tensor(top_ids))
            torch.testing.assert_close(values, expected, rtol=0, atol=1e-5)
