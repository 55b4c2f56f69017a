from collections import Counter

import numpy as np
import pytest

from spacy_elmo.training.vocab import Vocab, count_tokens


def test_top_n_with_min_count_and_specials_first():
    counts = count_tokens([["a", "b", "a", "c"], ["a", "b", "d"]])
    vocab = Vocab.from_counts(counts, size=5, min_count=2)
    assert vocab.tokens == ["<S>", "</S>", "<UNK>", "a", "b"]
    vocab = Vocab.from_counts(counts, size=4, min_count=1)
    assert vocab.tokens == ["<S>", "</S>", "<UNK>", "a"]
    with pytest.raises(ValueError):
        Vocab.from_counts(counts, size=3)


def test_encode_maps_unknown_words_to_unk():
    vocab = Vocab(["a", "b"])
    assert vocab.encode(["a", "zzz", "b"]).tolist() == [vocab.bos, 3, vocab.unk, 4, vocab.eos]
    assert vocab.encode(["b"], boundaries=False).dtype == np.int64


def test_round_trip_in_bilm_tf_format(tmp_path):
    vocab = Vocab.from_counts(Counter({"x": 3, "y": 2, "<S>": 9}), size=10)
    path = vocab.to_disk(tmp_path)
    assert path.read_text(encoding="utf-8").splitlines() == ["<S>", "</S>", "<UNK>", "x", "y"]
    assert Vocab.from_disk(tmp_path).tokens == vocab.tokens
    with pytest.raises(FileNotFoundError):
        Vocab.from_disk(tmp_path / "nowhere")
