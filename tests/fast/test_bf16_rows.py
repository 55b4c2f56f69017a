"""The packed bf16 kernel of a few rows: torch's bf16 products' results, and one sentence in bf16 on it."""
import pytest
import torch
from torch import nn

from spacy_elmo.fast import bf16_rows, kernel_library, optimize_for_inference
from spacy_elmo.fast import precision as quantize

from ..bilm.sentences import SENTENCES, layers
from ..conftest import random_bilm

pytestmark = pytest.mark.skipif(kernel_library.compiler() is None, reason="no C++ compiler here")


@pytest.fixture
def kernel(monkeypatch):
    """bf16 taken as supported (torch emulates it on CPUs without it: slow, still correct), and the
    compiled library loaded."""
    monkeypatch.setattr(quantize, "cpu_has_bf16", lambda: True)
    if bf16_rows.rows_op() is None:
        pytest.fail(f"the compiled library did not build: {kernel_library.status()}")


@pytest.mark.parametrize("shape", [(2, 1, 512, 256), (2, 3, 7, 70), (1, 4, 130, 64)])
def test_the_kernel_computes_torchs_bf16_product(kernel, shape):
    n_dir, rows, width, out_features = shape
    torch.manual_seed(0)
    weights = torch.randn(n_dir, width, out_features) * 0.035
    x, add = torch.randn(n_dir, rows, width), torch.randn(n_dir, rows, out_features)
    packed = bf16_rows.pack(weights.transpose(1, 2).contiguous().transpose(1, 2))  # strides do not matter
    assert torch.equal(packed, bf16_rows.pack(weights))
    got = bf16_rows.product(x, packed, torch.empty(n_dir, rows, out_features), add=add)
    product = torch.bmm(x.bfloat16(), weights.bfloat16()).float()
    # the same bf16 contract; the sums' order differs, so a rounded product may land one bf16 step away
    torch.testing.assert_close(got - add, product, rtol=2**-7, atol=1e-6)
    exact = (x.bfloat16().double() @ weights.bfloat16().double()).float()
    assert ((got - add) - exact).abs().max() <= exact.abs().max() * 2**-8 + 1e-6
    # rows of a larger buffer (the timestep's outputs of fewer running rows), without add
    buffer = torch.full((n_dir, rows + 2, out_features), 7.0)
    bf16_rows.product(x, packed, buffer[:, :rows])
    assert torch.equal(buffer[:, :rows], got - add) or torch.allclose(buffer[:, :rows], got - add, atol=1e-6, rtol=0)
    assert torch.equal(buffer[:, rows:], torch.full_like(buffer[:, rows:], 7.0))


def test_packing_puts_every_weight_where_the_kernel_reads_it(kernel):
    weights = torch.zeros(1, 5, 70)
    weights[0, 3, 66] = 1.5  # an odd input, in the second (padded) block
    packed = bf16_rows.pack(weights)
    assert packed.shape == (1, 2, 3, 128) and packed.dtype == torch.bfloat16
    x = torch.zeros(1, 1, 5)
    x[0, 0, 3] = 2.0
    y = bf16_rows.product(x, packed, torch.empty(1, 1, 70))
    expected = torch.zeros(1, 1, 70)
    expected[0, 0, 66] = 3.0
    assert torch.equal(y, expected)


def test_the_op_refuses_weights_of_another_width(kernel):
    packed = bf16_rows.pack(torch.randn(2, 8, 64))
    with pytest.raises(RuntimeError, match="widths do not match"):
        bf16_rows.product(torch.randn(2, 1, 10), packed, torch.empty(2, 1, 64))


def test_one_sentence_in_bf16_takes_the_kernel_and_matches_torchs_products_and_its_batch(kernel, monkeypatch):
    reference = layers(random_bilm(seed=3, dim=64, projection_dim=32)).layers
    fast = optimize_for_inference(random_bilm(seed=3, dim=64, projection_dim=32), precision="bf16")
    calls = []
    original = bf16_rows.product
    monkeypatch.setattr(bf16_rows, "product", lambda *a, **k: calls.append(a[0].shape[1]) or original(*a, **k))
    alone = [layers(fast, [sentence]).layers[:, 0] for sentence in SENTENCES]
    assert calls and set(calls) == {1}  # one row: every product on the kernel
    calls.clear()
    batch = layers(fast).layers
    assert calls and max(calls) <= bf16_rows.ROWS  # the batch's last steps (few rows) too; the rest on torch's
    monkeypatch.setattr(bf16_rows, "ROWS", 0)  # torch's bf16 products only
    on_torch = [layers(fast, [sentence]).layers[:, 0] for sentence in SENTENCES]
    for row, (mine, torchs) in enumerate(zip(alone, on_torch)):
        n = len(SENTENCES[row])
        if n == 0:
            continue
        valid = reference[:, row, :n].abs().sum(-1) > 0
        for other in (torchs[:, :n], batch[:, row, :n], reference[:, row, :n]):
            cos = nn.functional.cosine_similarity(mine[:, :n][valid], other[valid], dim=-1)
            assert cos.min() > 0.999  # the precision's stated tolerance (test_precision.py)
