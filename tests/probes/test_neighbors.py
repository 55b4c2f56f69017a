import numpy as np
import pytest

from spacy_elmo.probes.neighbors import SenseIndex, static_neighbors

CORPUS = [
    "I deposited cash at the bank".split(),
    "We sat on the river bank".split(),
    "The bank raised interest rates".split(),
    "Fish swam near the muddy bank of the river".split(),
    "Nothing here".split(),
]


def test_query_ranks_by_cosine_and_skips_the_query_itself(tiny_bilm):
    index = SenseIndex(tiny_bilm, CORPUS)
    assert len(index) == 5
    hits = index.query(CORPUS[0], 5, k=10)
    assert len(hits) == 3  # three other uses of "bank"
    assert all(h.sentence[h.position].lower() == "bank" for h in hits)
    scores = [h.score for h in hits]
    assert scores == sorted(scores, reverse=True)
    # The scores are the real cosines of the mean-of-layers vectors.
    [q] = tiny_bilm.embed([CORPUS[0]])
    [d] = tiny_bilm.embed([list(hits[0].sentence)])
    a, b = q.mean(0)[5], d.mean(0)[hits[0].position]
    assert hits[0].score == pytest.approx(float(a @ b / np.linalg.norm(a) / np.linalg.norm(b)), abs=1e-5)
    assert "[bank]" in hits[0].highlighted()


def test_layer0_cannot_tell_senses_apart(tiny_bilm):
    index = SenseIndex(tiny_bilm, CORPUS, layer=0, words=["bank"])
    hits = index.query(CORPUS[0], 5)
    assert [h.score for h in hits] == pytest.approx([1.0, 1.0, 1.0], abs=1e-6)
    contextual = SenseIndex(tiny_bilm, CORPUS, layer=2, words=["bank"]).query(CORPUS[0], 5)
    assert max(h.score for h in contextual) < 0.9999


def test_unknown_word_and_bad_position(tiny_bilm):
    index = SenseIndex(tiny_bilm, CORPUS, words=["bank"])
    assert len(index) == 4
    assert index.query("a zebra".split(), 1) == []
    with pytest.raises(ValueError, match="position"):
        index.query(["a"], 3)


def test_static_neighbors_are_sorted_and_exclude_the_word(tiny_bilm):
    found = static_neighbors(tiny_bilm, "bank", ["Bank", "banks", "tank", "river", "money"], k=3)
    assert len(found) == 3 and all(w.lower() != "bank" for w, _ in found)
    assert [s for _, s in found] == sorted([s for _, s in found], reverse=True)


def test_a_corpus_line_longer_than_a_window_is_searched_in_windows(tiny_bilm):
    import spacy

    from spacy_elmo.bilm.batching import MAX_WINDOW
    from spacy_elmo.io.text_input import TextLine
    from spacy_elmo.probes.neighbors import search_neighbors

    words = "the river bank was muddy and the bank lent money to fish".split()
    line = " ".join(words[i % len(words)] for i in range(3 * MAX_WINDOW + 7))
    steps = []
    tiny_bilm.register_forward_pre_hook(lambda module, args: steps.append(args[0].shape[1]))
    found = search_neighbors(tiny_bilm, [TextLine("a.txt", 1, line)], spacy.blank("en").tokenizer, "the bank lent money",
                             "bank", k=3)
    assert found.sentences == 4 and found.uses == 4  # four windows, each holding the word
    assert max(steps) <= MAX_WINDOW + 2
    assert len(found.neighbors) == 3 and all(len(hit.sentence) <= MAX_WINDOW for hit in found.neighbors)
