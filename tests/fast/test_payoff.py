"""A reduced precision slower than fp32 in a regime says so once, with the numbers; fp32 never measures."""
import warnings

import pytest
import torch

from spacy_elmo.fast import optimize_for_inference, payoff
from spacy_elmo.fast import precision as quantize

from ..bilm.sentences import SENTENCES, layers
from ..conftest import random_bilm


@pytest.fixture
def measured(monkeypatch):
    """The products' timing replaced by fixed microseconds (fp32 100, the precision 250): the
    condition made deterministically; what the check does with them is what is tested."""
    payoff.forget_said()
    calls = []

    def fixed(pairs, precision, rows):
        calls.append((precision, rows))
        return 100.0, 250.0

    monkeypatch.setattr(payoff, "time_products", fixed)
    monkeypatch.setattr(quantize, "cpu_has_bf16", lambda: True)
    yield calls
    payoff.forget_said()


@pytest.mark.parametrize("precision", ["bf16", "int8"])
def test_a_precision_slower_than_fp32_warns_once_per_regime_with_the_numbers(measured, precision):
    fast = optimize_for_inference(random_bilm(seed=2, dim=32, projection_dim=16), precision=precision)
    with pytest.warns(RuntimeWarning, match=rf'"{precision}" is slower than fp32 here, one sentence at a time.*'
                                            r"1 row, .*250 us against 100 us in fp32 \(0\.40x fp32; best of 5"):
        layers(fast, SENTENCES[:1])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        layers(fast, SENTENCES[1:2])  # the same regime: measured and said once
    with pytest.warns(RuntimeWarning, match=r"batch at a time.*3 rows"):
        layers(fast, SENTENCES[:3])
    assert measured == [(precision, 1), (precision, 3)]


def test_fp32_and_a_precision_that_pays_stay_silent(measured, monkeypatch):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        layers(optimize_for_inference(random_bilm(seed=2), precision="fp32"), SENTENCES[:1])
        assert measured == []
        monkeypatch.setattr(payoff, "time_products", lambda pairs, precision, rows: (100.0, 120.0))  # within MARGIN
        layers(optimize_for_inference(random_bilm(seed=2), precision="bf16"), SENTENCES[:1])
        monkeypatch.setenv(payoff.ENV, "0")
        payoff.forget_said()
        monkeypatch.setattr(payoff, "time_products", lambda *a: pytest.fail("measured although switched off"))
        layers(optimize_for_inference(random_bilm(seed=2), precision="int8"), SENTENCES[:1])


@pytest.mark.parametrize("precision,rows", [("bf16", 1), ("bf16", 6), ("int8", 1), ("fp16", 2)])
def test_the_measurement_times_both_products_on_the_models_weights(monkeypatch, precision, rows):
    monkeypatch.setattr(quantize, "cpu_has_bf16", lambda: True)
    fast = optimize_for_inference(random_bilm(seed=2, dim=32, projection_dim=16), precision=precision)
    pairs = list(zip(fast.forward_lstm.layers, fast.backward_lstm.layers))
    products = payoff.step_products(pairs, precision, rows)
    assert sorted(products) == sorted({"fp32", precision})
    fp32_us, precision_us = payoff.time_products(pairs, precision, rows)
    assert fp32_us > 0 and precision_us > 0
    assert payoff.stack_precision(fast.forward_lstm) == precision
