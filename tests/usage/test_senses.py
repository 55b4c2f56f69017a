"""Sense induction from the biLM's substitutes: the symmetric pattern's sentences, the bags, TF-IDF,
and the clustering into described senses, with a tiny published head."""
import math

import numpy as np
import pytest

from spacy_elmo.io.loading import load_lm_head
from spacy_elmo.usage.senses import (
    SenseSettings, describe_senses, induce_senses, substitute_bags, tfidf_matrix,
)
from spacy_elmo.usage.substitutes import sentence_substitutes

from ..published_head import write_published_head

CONTEXTS = [
    ("the cat sees a bird".split(), 1),
    ("a big cat likes fish".split(), 2),
    ("the dog sees a cat".split(), 4),
    ("the cat sees a bird".split(), 1),
]


@pytest.fixture(scope="module")
def lm(tmp_path_factory):
    return load_lm_head(write_published_head(tmp_path_factory.mktemp("pub") / "pub"))


def _bag(listed, target, top):
    kept = [s for s in listed if s.word.lower() != target][:top]
    weights = [math.exp(s.log_prob) for s in kept]
    return {s.word: w / sum(weights) for s, w in zip(kept, weights)}


def test_the_pattern_bags_are_the_forward_lm_after_x_and_and_the_backward_lm_before_and_x(lm):
    bilm, head = lm
    exclude = ["<S>", "</S>", "<UNK>", "."]  # and one-character words: "a", "."
    exclude += [w for w in head.words if len(w) == 1]
    bags = substitute_bags(bilm, head, CONTEXTS[:3], top=3)
    for (tokens, i), bag in zip(CONTEXTS[:3], bags):
        [forward] = sentence_substitutes(bilm, head, [tokens[: i + 1] + ["and", tokens[i]]], top=4, exclude=exclude)
        [backward] = sentence_substitutes(bilm, head, [[tokens[i], "and"] + tokens[i:]], top=4, exclude=exclude)
        expected = {f"f:{w}": p for w, p in _bag(forward[i + 2].forward, tokens[i], 3).items()}
        expected.update({f"b:{w}": p for w, p in _bag(backward[0].backward, tokens[i], 3).items()})
        assert bag.keys() == expected.keys()
        for key in bag:
            assert bag[key] == pytest.approx(expected[key], rel=1e-5)
        assert not any(key.split(":", 1)[1] in ("cat", "<UNK>", "a", ".") for key in bag)


def test_without_patterns_the_bags_read_the_targets_own_slot(lm):
    bilm, head = lm
    [bag] = substitute_bags(bilm, head, [CONTEXTS[1]], top=2, patterns=False)
    exclude = ["<S>", "</S>", "<UNK>", *(w for w in head.words if len(w) == 1)]
    [found] = sentence_substitutes(bilm, head, [CONTEXTS[1][0]], top=3, exclude=exclude)
    expected = {f"f:{w}" for w in _bag(found[2].forward, "cat", 2)} | {f"b:{w}" for w in _bag(found[2].backward, "cat", 2)}
    assert set(bag) == expected


def test_tfidf_weights_rare_features_up_and_normalizes_rows():
    matrix, features = tfidf_matrix([{"f:a": 1.0}, {"f:a": 1.0, "b:c": 1.0}])
    assert features == ["b:c", "f:a"]
    idf_c = math.log(3 / 2) + 1  # ln((1 + n) / (1 + df)) + 1, df 1 of n 2; "f:a" has df 2: idf 1
    np.testing.assert_allclose(matrix[0], [0.0, 1.0])
    np.testing.assert_allclose(matrix[1], np.array([idf_c, 1.0]) / math.hypot(idf_c, 1.0))
    plain, _ = tfidf_matrix([{"f:a": 1.0}, {"f:a": 1.0, "b:c": 1.0}], tfidf=False)
    np.testing.assert_allclose(plain[1], [1 / math.sqrt(2)] * 2)


def test_induced_senses_cover_every_use_once_and_identical_uses_share_a_sense(lm):
    bilm, head = lm
    inventory = induce_senses(bilm, head, CONTEXTS, SenseSettings(n_clusters=2, top=3, examples=1))
    assert len(inventory.labels) == 4 and inventory.labels[0] == inventory.labels[3]
    assert sorted(m for s in inventory.senses for m in s.members) == [0, 1, 2, 3]
    assert len(inventory.senses) == 2 and inventory.senses[0].size >= inventory.senses[1].size
    for sense in inventory.senses:
        assert len(sense.examples) == 1 and "[cat]" in sense.examples[0]
        assert sum(w for _, w in sense.substitutes) <= 1 + 1e-9
    assert inventory.senses[0].to_dict()["substitutes"][0]["word"] == inventory.senses[0].substitutes[0][0]
    with pytest.raises(ValueError):
        induce_senses(bilm, head, [], SenseSettings())


def test_senses_are_described_by_their_summed_substitutes_largest_first():
    bags = [{"f:x": 0.6, "b:y": 0.4}, {"f:y": 1.0}, {"f:z": 1.0}]
    contexts = [(["a", "w"], 1), (["w", "b"], 0), (["c", "w"], 1)]
    senses = describe_senses(np.array([1, 1, 0]), bags, contexts, top=2, examples=2)
    assert [s.label for s in senses] == [1, 0]
    assert senses[0].substitutes == (("y", 0.7), ("x", 0.3))
    assert senses[0].examples == ("a [w]", "[w] b") and senses[1].members == (2,)


def test_senses_are_numbered_from_the_largest_down_ties_by_their_first_use():
    import numpy as np

    from spacy_elmo.usage.senses import numbered_by_size

    assert numbered_by_size(np.array([2, 2, 0, 1, 1, 1, 3])).tolist() == [1, 1, 2, 0, 0, 0, 3]
    assert numbered_by_size(np.array([5, 5])).tolist() == [0, 0]
