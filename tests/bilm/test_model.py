import json

import h5py
import numpy as np
import pytest
import torch

from spacy_elmo.bilm import BiLM, BiLMConfig, ScalarMix, batch_char_ids
from spacy_elmo.io import load_allennlp

from ..conftest import TRAINED, random_bilm

ATOL = 1e-5


def test_each_sentence_alone_matches_reference(tiny_bilm, tiny_sentences, tiny_expected):
    for i, tokens in enumerate(tiny_sentences):
        [layers] = tiny_bilm.embed([tokens])
        np.testing.assert_allclose(layers, tiny_expected[f"layers_{i}"], atol=ATOL, err_msg=f"sentence {i}")
        [with_bounds] = tiny_bilm.embed([tokens], boundaries=True)
        np.testing.assert_allclose(with_bounds, tiny_expected[f"layers_with_boundaries_{i}"], atol=ATOL)


@pytest.mark.parametrize("order", ["forward", "reversed"])
def test_one_batch_matches_reference_in_both_orders(tiny_bilm, tiny_sentences, tiny_expected, order):
    indices = list(range(len(tiny_sentences)))
    if order == "reversed":
        indices.reverse()
    outputs = tiny_bilm.embed([tiny_sentences[i] for i in indices], batch_size=len(indices))
    for i, layers in zip(indices, outputs):
        np.testing.assert_allclose(layers, tiny_expected[f"layers_{i}"], atol=ATOL, err_msg=f"sentence {i}")


def test_scalar_mix_matches_reference_elmo(tiny_bilm, tiny_sentences, tiny_expected):
    mix = ScalarMix(3)
    for i, layers in enumerate(tiny_bilm.embed(tiny_sentences)):
        with torch.no_grad():
            elmo = mix(torch.from_numpy(layers)[:, None])[0].numpy()
        np.testing.assert_allclose(elmo, tiny_expected[f"elmo_{i}"], atol=ATOL)


def _trained_batches():
    sentences = json.loads((TRAINED / "sentences.json").read_text(encoding="utf-8"))
    expected = [h5py.File(TRAINED / f"lm_embeddings_{k}.hdf5", "r") for k in range(3)]
    for i in range(10):
        tokens = [sentences[k][i].split() for k in range(3)]
        tops = [np.concatenate(list(expected[k][str(i)][...]), axis=-1) for k in range(3)]
        yield tokens, tops


def test_trained_fixture_batch0_from_zero_state(trained_paths):
    bilm = load_allennlp(*trained_paths)
    tokens, tops = next(_trained_batches())
    for layers, top in zip(bilm.embed(tokens), tops):
        np.testing.assert_allclose(layers[-1], top, atol=ATOL)


def test_trained_fixture_all_batches_stateful(trained_paths):
    bilm = load_allennlp(*trained_paths)
    bilm.stateful = True
    for i, (tokens, tops) in enumerate(_trained_batches()):
        for layers, top in zip(bilm.embed(tokens, batch_size=3), tops):
            np.testing.assert_allclose(layers[-1], top, atol=ATOL, err_msg=f"batch {i}")
    # Stateless use gets batch 1 wrong: the carried state matters.
    bilm.stateful = False
    tokens, tops = list(_trained_batches())[1]
    assert max(np.abs(l[-1] - t).max() for l, t in zip(bilm.embed(tokens), tops)) > 1e-3


def test_stateless_calls_do_not_carry_state(tiny_bilm, tiny_sentences):
    """Bitwise: the same sentences in the same batches are the same computation."""
    first = tiny_bilm.embed(tiny_sentences[:3])
    tiny_bilm.embed(tiny_sentences[3:])
    again = tiny_bilm.embed(tiny_sentences[:3])
    for a, b in zip(first, again):
        np.testing.assert_array_equal(a, b)


def test_bank_layer0_equal_contextual_layers_differ(tiny_bilm, tiny_sentences, tiny_names):
    money = tiny_bilm.embed([tiny_sentences[tiny_names.index("bank_money")]])[0][:, -1]
    river = tiny_bilm.embed([tiny_sentences[tiny_names.index("bank_river")]])[0][:, -1]
    # layer 0 sees the token alone, but each sentence's distinct tokens are encoded in a batch of
    # another size, which may round differently (not bitwise); a context would move it by > 1e-3
    np.testing.assert_allclose(money[0], river[0], atol=1e-6, rtol=0)
    assert np.abs(money[1] - river[1]).max() > 1e-3
    assert np.abs(money[2] - river[2]).max() > 1e-3


def test_padding_and_batch_mates_do_not_change_outputs():
    bilm = random_bilm(seed=3)
    sentences = [["a", "b", "c"], ["longer", "sentence", "with", "more", "tokens", "here"], ["x"]]
    alone = [bilm.embed([s])[0] for s in sentences]
    together = bilm.embed(sentences, batch_size=8)
    for a, b in zip(alone, together):
        np.testing.assert_allclose(a, b, atol=ATOL)


@pytest.mark.parametrize("n_layers", [1, 3])
def test_any_number_of_layers(n_layers):
    bilm = random_bilm(n_layers=n_layers)
    [layers] = bilm.embed([["one", "two"]])
    assert layers.shape == (n_layers + 1, 2, 16)
    # bitwise: layer 0 is the token encoding written twice (for the two directions' halves)
    np.testing.assert_array_equal(layers[0, :, :8], layers[0, :, 8:])


def test_empty_sentence_gives_empty_array(small_bilm):
    out = small_bilm.embed([[], ["a"]])
    assert out[0].shape == (3, 0, 16) and out[1].shape == (3, 1, 16)


def test_gradients_flow_through_all_parameters(small_bilm):
    ids, lengths = batch_char_ids([["a", "bc"], ["d"]])
    small_bilm.train()
    out = small_bilm(torch.from_numpy(ids), torch.from_numpy(lengths))
    out.layers.sum().backward()
    missing = [n for n, p in small_bilm.named_parameters() if p.grad is None or not p.grad.abs().sum() > 0]
    assert missing == []


def test_config_round_trips_published_options(tiny_paths):
    options = json.loads(tiny_paths[0].read_text())
    config = BiLMConfig.from_options(options)
    assert BiLMConfig.from_options(config.to_options()) == config
    assert config.filters == ((1, 8), (2, 8), (3, 16)) and config.cell_clip == 3.0


def test_config_rejects_nonsense():
    with pytest.raises(ValueError, match="n_layers"):
        BiLMConfig(n_layers=0)
    with pytest.raises(ValueError, match="activation"):
        BiLMConfig(activation="gelu")
