import pytest
from spacy.tokens import Doc
from spacy.vocab import Vocab

from spacy_elmo.layers import doc_segments


def _doc(n, sent_starts=None):
    return Doc(Vocab(), words=[f"w{i}" for i in range(n)], sent_starts=sent_starts)


def test_doc_without_boundaries_is_cut_into_windows():
    assert doc_segments(_doc(450), 200) == [(0, 200), (200, 400), (400, 450)]
    assert doc_segments(_doc(200), 200) == [(0, 200)]


def test_sentences_are_segments_and_long_sentences_are_windowed():
    starts = [True] + [False] * 4 + [True] + [False] * 6
    assert doc_segments(_doc(12, starts), 200) == [(0, 5), (5, 12)]
    assert doc_segments(_doc(12, starts), 3) == [(0, 3), (3, 5), (5, 8), (8, 11), (11, 12)]


def test_single_token_and_empty_docs():
    assert doc_segments(_doc(1), 200) == [(0, 1)]
    assert doc_segments(_doc(0), 200) == []


def test_max_window_must_be_positive():
    with pytest.raises(ValueError, match="max_window"):
        doc_segments(_doc(3), 0)
