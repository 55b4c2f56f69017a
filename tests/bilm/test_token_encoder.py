"""The character-level token encoder: distinct tokens once, and the highway's few-row path."""
import numpy as np
import pytest
import torch

from spacy_elmo.bilm import batch_char_ids, token_char_ids
from spacy_elmo.bilm.highway import Highway

from ..conftest import random_bilm


def test_encode_distinct_gives_each_token_once_and_forward_gathers_it():
    bilm = random_bilm(seed=21)
    # rows: <S> the bank the river </S> / <S> bank . </S> pad pad
    ids, _ = batch_char_ids([["the", "bank", "the", "river"], ["bank", "."]])
    char_ids = torch.from_numpy(ids)
    with torch.no_grad():
        encoded, inverse = bilm.token_encoder.encode_distinct(char_ids)
        full = bilm.token_encoder(char_ids)
    assert inverse.shape == char_ids.shape[:-1]
    assert encoded.shape[0] == 7  # <S>, </S>, the, bank, river, ., the padding row
    assert inverse[0, 1] == inverse[0, 3] and inverse[0, 2] == inverse[1, 1]
    assert inverse[0, 1] != inverse[0, 2]
    # bitwise: forward encodes the distinct rows the same way and gathers them
    torch.testing.assert_close(encoded[inverse], full, atol=0, rtol=0)


def test_encode_distinct_of_no_tokens():
    bilm = random_bilm(seed=21)
    encoded, inverse = bilm.token_encoder.encode_distinct(torch.zeros(0, 50, dtype=torch.long))
    assert encoded.shape == (0, bilm.config.projection_dim) and inverse.shape == (0,)


@pytest.mark.parametrize("rows", [1, 2, 3, 4, 5, 9])
def test_highway_few_row_path_equals_the_linear_layers(rows, monkeypatch):
    transposed = []  # addmm calls of the (W @ x^T) form: the bias comes as a column
    addmm = torch.addmm

    def spy(bias, *args, **kwargs):
        transposed.append(bias.dim() == 2 and bias.shape[1] == 1)
        return addmm(bias, *args, **kwargs)

    monkeypatch.setattr(torch, "addmm", spy)
    torch.manual_seed(rows)
    highway = Highway(64, 2)
    x = torch.randn(rows, 64)

    def reference(x):
        for transform, carry in zip(highway.transform, highway.carry):
            gate = torch.sigmoid(carry(x))
            x = gate * torch.relu(transform(x)) + (1.0 - gate) * x
        return x

    with torch.no_grad():
        got = highway(x)
        expected = reference(x)
    assert got.shape == (rows, 64)
    torch.testing.assert_close(got, expected, atol=1e-6, rtol=1e-6)
    # 2-4 rows take the W @ x^T path in both layers' two products; other counts go through nn.Linear
    assert sum(transposed) == (4 if 2 <= rows <= 4 else 0)
    # with autograd the layers run as they are, and gradients reach every weight
    highway(x).sum().backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in highway.parameters())


def test_token_encoder_equals_full_width_convolutions():
    bilm = random_bilm(seed=2, filters=((1, 4), (2, 4), (3, 8), (5, 8)))
    enc = bilm.token_encoder
    generator = torch.Generator().manual_seed(0)
    rows = [token_char_ids(t) for t in ["a", "bank", "b" * 47, "c" * 48, "é" * 30, "<S>", "</S>", ""]]
    ids = torch.from_numpy(np.stack(rows))
    # arbitrary ids, including rows whose filler is not the PAD id, and an all-padding row
    noise = torch.randint(1, 262, (6, 50), generator=generator)
    noise[:3, 20:] = 7
    ids = torch.cat([ids, noise, torch.zeros(1, 50, dtype=torch.long), ids[:2]])
    with torch.no_grad():
        embedded = enc.char_embedding(ids).transpose(1, 2)
        pooled = torch.cat([torch.relu(conv(embedded).max(dim=-1).values) for conv in enc.convolutions], dim=-1)
        expected = enc.projection(enc.highway(pooled))
        got = enc(ids)
    torch.testing.assert_close(got, expected, atol=1e-6, rtol=0)
    # bitwise: repeated rows are encoded once and gathered
    torch.testing.assert_close(got[-2:], got[:2], atol=0, rtol=0)


def test_token_encoder_gradients_equal_full_width_convolutions():
    """Under autograd the pooling takes max with indices; the filler windows that tie give the
    weights the same gradient as full-width convolutions with their shared (amax) gradient."""
    bilm = random_bilm(seed=3, filters=((1, 4), (2, 4), (3, 8)))
    enc = bilm.token_encoder
    ids = torch.from_numpy(np.stack([token_char_ids(t) for t in ["a", "bank", "a", "x" * 49, "of"]]))
    grads = []
    for full_width in (False, True):
        enc.zero_grad()
        if full_width:
            embedded = enc.char_embedding(ids).transpose(1, 2)
            pooled = torch.cat([torch.relu(conv(embedded).amax(dim=-1)) for conv in enc.convolutions], dim=-1)
            out = enc.projection(enc.highway(pooled))
        else:
            out = enc(ids)
        (out * torch.linspace(-1, 1, out.numel()).view(out.shape)).sum().backward()
        grads.append([p.grad.clone() for p in enc.parameters()])
    for got, want in zip(*grads):
        torch.testing.assert_close(got, want, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("shape", [(40, 6), (1, 3), (0, 4), (5, 0)])
def test_unique_rows_agrees_with_torch_unique(shape):
    from spacy_elmo.bilm.token_encoder import unique_rows

    rows = torch.randint(0, 3, shape, generator=torch.Generator().manual_seed(0))
    distinct, inverse = unique_rows(rows)
    assert torch.equal(distinct[inverse], rows) and inverse.dtype == torch.long
    assert len(distinct) == len(set(map(tuple, rows.tolist())))  # each distinct row once



def test_rows_gathered_by_a_repeating_index_sum_their_gradients_in_one_order_on_two_threads():
    """take_rows: table[index]'s values, and a gradient that repeats bit for bit at two threads (advanced
    indexing's backward summed a row's repeats in the threads' order: a seeded run did not repeat)."""
    from spacy_elmo.bilm.token_encoder import take_rows

    torch.set_num_threads(2)
    gen = torch.Generator().manual_seed(0)
    table = torch.randn(300, 64, generator=gen)
    index = torch.randint(0, 40, (50, 400), generator=gen)  # every row many times over
    upstream = torch.randn(50, 400, 64, generator=gen)
    assert torch.equal(take_rows(table, index), table[index])
    grads = []
    for _ in range(6):
        leaf = table.clone().requires_grad_()
        (take_rows(leaf, index) * upstream).sum().backward()
        grads.append(leaf.grad)
    assert all(torch.equal(grads[0], g) for g in grads[1:])
    torch.testing.assert_close(grads[0], torch.zeros_like(table).index_put_((index.reshape(-1),), upstream.reshape(-1, 64),
                                                                             accumulate=True), atol=1e-4, rtol=1e-4)
