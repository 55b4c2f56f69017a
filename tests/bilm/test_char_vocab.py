"""Token ids from a learned character vocabulary (ELMoForManyLangs' models; tests/io/test_efml.py
checks them against EFML's own ids)."""
import numpy as np
import pytest
import torch

from spacy_elmo.bilm import BiLM, BiLMConfig, CharVocabulary

CHARS = {c: i for i, c in enumerate(["a", "b", "é", "<bos>", "<eos>", "<oov>", "<pad>", "<bow>", "<eow>"])}


def _vocab(**changes) -> CharVocabulary:
    values = dict(chars=CHARS, begin_word=8, end_word=7, padding=6, unknown=5, bos=3, eos=4)
    values.update(changes)
    return CharVocabulary(**values)


def test_a_row_is_word_id_then_begin_characters_end_and_padding():
    vocab = _vocab(words={"<oov>": 0, "ab": 1}, word_unknown=0, word_dim=2)
    assert vocab.token_ids("ab", 8).tolist() == [1, 8, 0, 1, 7, 6, 6, 6, 6]
    assert vocab.token_ids("aXé", 8).tolist() == [0, 8, 0, 5, 2, 7, 6, 6, 6]
    # boundary tokens, and a literal input token equal to one, hold their own char id
    assert vocab.token_ids("<bos>", 8).tolist()[:4] == [0, 8, 3, 7]


def test_tokens_are_cut_to_max_chars_minus_two_code_points_for_chars_and_words():
    vocab = _vocab(words={"<oov>": 0, "aaaa": 1}, word_dim=2)
    row = vocab.token_ids("aaaaé", 6)
    assert row.tolist() == [1, 8, 0, 0, 0, 0, 7]


def test_batch_ids_pad_with_zero_rows_and_count_the_boundaries():
    ids, lengths = _vocab().batch_ids([["a"], ["a", "b", "a"]], 6)
    assert ids.shape == (2, 5, 7) and lengths.tolist() == [3, 5]
    assert not ids[0, 3:].any() and ids[0, 0].tolist()[:4] == [0, 8, 3, 7]


def test_json_round_trip_and_invalid_ids_are_refused():
    vocab = _vocab(words={"<oov>": 0, "a": 1}, word_dim=3)
    again = CharVocabulary.from_json(vocab.to_json())
    assert again.to_json() == vocab.to_json()
    with pytest.raises(ValueError, match="padding id 9"):
        _vocab(padding=9)
    with pytest.raises(ValueError, match="together"):
        _vocab(words={"a": 0})


def test_a_biLM_with_a_vocabulary_embeds_and_refuses_ids_of_the_wrong_width():
    config = BiLMConfig(n_characters=len(CHARS), filters=((1, 4), (2, 4)), n_highway=1, dim=8, projection_dim=4)
    bilm = BiLM(config, char_vocab=_vocab(words={"<oov>": 0, "a": 1}, word_dim=3)).eval()
    assert bilm.token_encoder.projection.in_features == 3 + 8
    layers = bilm.embed([["a", "b"], []])
    assert layers[0].shape == (3, 2, 8) and layers[1].shape == (3, 0, 8)
    ids, lengths = bilm.batch_ids([["a"]])
    with pytest.raises(ValueError, match="width 50"):
        bilm(torch.from_numpy(np.ascontiguousarray(ids[..., 1:])), torch.from_numpy(lengths))


def test_a_small_character_count_without_a_vocabulary_cannot_make_byte_ids():
    bilm = BiLM(BiLMConfig(n_characters=9, filters=((1, 4),), dim=8, projection_dim=4))
    with pytest.raises(ValueError, match="no character vocabulary"):
        bilm.embed([["a"]])
