"""Counting the training corpus in bounded memory: spilled runs merge into the vocabulary a whole Counter gives."""
import random
from collections import Counter

import pytest

from spacy_elmo.training.counting import TokenCounts, count_tokens
from spacy_elmo.training.vocab import Vocab


def zipf_segments(n: int, seed: int):
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(400)] + ["<S>", "<UNK>"]
    weights = [1 / (i + 1) for i in range(len(words))]
    return [rng.choices(words, weights, k=rng.randint(1, 12)) for _ in range(n)]


@pytest.mark.parametrize("size,min_count", [(50, 1), (500, 1), (120, 5)])
def test_spilled_counts_give_the_vocabulary_of_a_whole_counter(tmp_path, size, min_count):
    segments = zipf_segments(3000, seed=size)
    whole = Counter()
    for tokens in segments:
        whole.update(tokens)
    counts = count_tokens(segments, TokenCounts(tmp_path, max_types=40))
    assert len(counts.runs) > 5 and len(counts.counts) <= 40 + 12  # memory held at most one segment past the bound
    assert counts.distinct == len(whole)
    expected = Vocab.from_counts(whole, size=size, min_count=min_count)
    assert counts.vocab(size=size, min_count=min_count).tokens == expected.tokens


def test_a_vocabulary_too_small_is_refused(tmp_path):
    with pytest.raises(ValueError, match="vocabulary size must be at least"):
        TokenCounts(tmp_path).vocab(size=3, min_count=1)
