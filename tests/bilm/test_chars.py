import numpy as np
import pytest

from spacy_elmo.bilm import batch_char_ids, sentence_char_ids, token_char_ids


def test_char_ids_match_reference_for_all_fixture_sentences(tiny_sentences, tiny_expected):
    assert len(tiny_sentences) == 18
    for i, tokens in enumerate(tiny_sentences):
        np.testing.assert_array_equal(sentence_char_ids(tokens, boundaries=False), tiny_expected[f"char_ids_{i}"])


def test_known_ids():
    ids = token_char_ids("a")
    assert ids[:4].tolist() == [259, ord("a") + 1, 260, 261]
    assert set(ids[4:].tolist()) == {261}
    assert token_char_ids("<S>")[:3].tolist() == [259, 257, 260]
    assert token_char_ids("</S>")[:3].tolist() == [259, 258, 260]


def test_truncation_keeps_48_bytes_and_may_split_a_character():
    ids = token_char_ids("a" * 47 + "é")  # é is two bytes: only the first survives
    assert ids[48] == 0xC3 + 1
    assert ids[49] == 260


@pytest.mark.parametrize(
    "token", ["\ud800", "\x00", "😀", "🇫🇷", "e\u0301", "x" * 1000, "", " ", "\n", "\udfff\ud800abc"]
)
def test_any_str_maps_without_raising(token):
    ids = token_char_ids(token)
    assert ids.shape == (50,)
    assert ids[0] == 259 and (ids > 0).all() and (ids <= 261).all()


def test_lone_surrogates_are_dropped_like_the_reference():
    np.testing.assert_array_equal(token_char_ids("a\ud800b"), token_char_ids("ab"))


def test_batch_ids_pad_with_zero_tokens_and_add_boundaries():
    ids, lengths = batch_char_ids([["a", "b"], [], ["c"]])
    assert ids.shape == (3, 4, 50)
    assert lengths.tolist() == [4, 2, 3]
    assert (ids[1, 2:] == 0).all()
    assert ids[1, 0, 1] == 257 and ids[1, 1, 1] == 258


def test_rows_come_from_a_shared_cache_but_callers_get_their_own_arrays():
    from spacy_elmo.bilm.chars import _shared_char_ids

    before = _shared_char_ids.cache_info().hits
    first = token_char_ids("bank")
    first[:] = 0  # a caller writing into its array changes nothing for the next one
    again = token_char_ids("bank")
    assert again[1] == ord("b") + 1 and again.flags.writeable
    sentence = sentence_char_ids(["bank", "bank"])
    assert sentence.flags.writeable and (sentence[1] == again).all() and (sentence[2] == again).all()
    sentence[1] = 0
    assert (sentence_char_ids(["bank"])[1] == again).all()
    assert _shared_char_ids.cache_info().hits >= before + 4  # "bank" was built once
