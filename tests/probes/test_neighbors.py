import numpy as np
import pytest

from spacy_elmo.probes.neighbors import NearestUses, SenseIndex, static_neighbors

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


def test_an_index_keeps_at_most_its_cap_of_uses_a_word_as_copies_while_it_counts_every_use(tiny_bilm):
    corpus = [f"the bank number {i} of the bank".split() for i in range(30)]
    index = SenseIndex(tiny_bilm, corpus, words=["bank"], max_uses=7, seed=3)
    assert index.seen("Bank") == 60 and index.kept("bank") == 7
    rows = index._vectors["bank"]
    assert rows.shape[0] == 7 and rows.dtype == np.float32 and rows.flags.owndata
    assert len(index._uses["bank"]) == 7
    again = SenseIndex(tiny_bilm, corpus, words=["bank"], max_uses=7, seed=3)
    assert index._uses["bank"] == again._uses["bank"]
    assert len(index.query(corpus[0], 1, k=20)) <= 7


def test_the_search_keeps_k_uses_however_many_it_sees_and_says_both(tiny_bilm):
    import spacy

    from spacy_elmo.io.text_input import TextLine
    from spacy_elmo.probes.neighbors import search_neighbors

    lines = [TextLine("a.txt", i + 1, " ".join(["the bank of the river"] * (i + 1))) for i in range(12)]
    kept_sizes = []
    original = NearestUses.offer

    def watched(self, *args):
        original(self, *args)
        kept_sizes.append(len(self._heap))

    NearestUses.offer = watched
    try:
        found = search_neighbors(tiny_bilm, lines, spacy.blank("en").tokenizer, "We sat on the river bank .", "bank", k=3)
    finally:
        NearestUses.offer = original
    assert found.uses_seen == sum(range(1, 13)) and found.uses_kept == 3 == len(found.neighbors)
    assert max(kept_sizes) == 3  # the heap never held more than k while 78 uses went by
    record = found.to_dict()
    assert record["uses_seen"] == 78 and record["uses_kept"] == 3


def test_the_streamed_search_finds_what_scoring_every_use_finds(tiny_bilm):
    import spacy

    from spacy_elmo.io.text_input import TextLine
    from spacy_elmo.probes.neighbors import search_neighbors

    found = search_neighbors(tiny_bilm, [TextLine("a.txt", i + 1, " ".join(s)) for i, s in enumerate(CORPUS)],
                             spacy.blank("en").tokenizer, "I deposited cash at the bank", "bank", k=2)
    every = SenseIndex(tiny_bilm, CORPUS, words=["bank"]).query(CORPUS[0], 5, k=2)
    assert [(h.sentence, h.position) for h in found.neighbors] == [(h.sentence, h.position) for h in every]
    assert [h.score for h in found.neighbors] == pytest.approx([h.score for h in every], abs=1e-6)
    assert found.uses_seen == 3  # the query's own sentence in the corpus is left out


def test_kept_rows_are_copies_that_do_not_hold_a_window_alive(tiny_bilm):
    from spacy_elmo.probes.neighbors import word_rows

    rows = list(word_rows(tiny_bilm, [tuple(s) for s in CORPUS], {"bank"}, "mean"))
    assert [len(p) for _, p, _ in rows] == [1, 1, 1, 1]
    width = 2 * tiny_bilm.config.projection_dim
    # each holds its own rows of the word alone, not a view into the sentence's (layers, tokens, width)
    assert all(r.flags.owndata and r.nbytes == len(p) * width * 4 for _, p, r in rows)
