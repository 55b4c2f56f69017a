"""A reduced precision slower than fp32 in a regime says so once, with the numbers; fp32 never measures
that, but chooses the route of its products per regime once per model shape."""
import json
import warnings

import pytest
import torch

from spacy_elmo.fast import optimize_for_inference, payoff, prepacked, route_cache
from spacy_elmo.fast import precision as quantize
from spacy_elmo.fast.precision import FP32, INT8

from ..bilm.sentences import SENTENCES, layers
from ..conftest import random_bilm


@pytest.fixture
def measured(monkeypatch):
    """The products' timing replaced by fixed rounds of microseconds (fp32 about 100, the precision
    about 250): the condition made deterministically; what the check does with them is what is tested."""
    payoff.forget_said()
    calls = []

    def fixed(pairs, precision, rows, fp32_route=prepacked.TORCH):
        calls.append((precision.name, rows))
        return [100.0, 104.0, 180.0, 100.0, 101.0, 99.0, 100.0], [250.0, 260.0, 240.0, 300.0, 250.0, 255.0, 251.0]

    monkeypatch.setattr(payoff, "time_products", fixed)
    monkeypatch.setattr(quantize, "cpu_has_bf16", lambda: True)
    yield calls
    payoff.forget_said()


@pytest.mark.parametrize("precision", ["bf16", "int8"])
def test_a_precision_slower_than_fp32_warns_once_per_regime_with_the_numbers(measured, precision):
    fast = optimize_for_inference(random_bilm(seed=2, dim=32, projection_dim=16), precision=precision)
    with pytest.warns(RuntimeWarning, match=rf'"{precision}" is slower than fp32 here, one sentence at a time.*'
                                            r"1 row, .*240 us against 99 us in fp32 at best \(0\.41x fp32\), "
                                            r"0\.40x fp32 in the median round \(range 0\.33-0\.75; 7 rounds"):
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
        monkeypatch.setattr(payoff, "time_products", lambda pairs, precision, rows, fp32_route: ([100.0] * 7, [120.0] * 7))  # within MARGIN
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
    chosen = fast.runner.precision  # what the runner holds, and the check measures
    assert chosen.name == precision and chosen.reduced
    products = payoff.step_products(pairs, chosen, rows)
    assert set(products) == {FP32, chosen}
    routes = prepacked.ROUTES if prepacked.available() else (prepacked.TORCH,)
    for route in routes:  # fp32 on either route
        with torch.no_grad():
            payoff.step_products(pairs, chosen, rows, route)[FP32]()
    fp32_us, precision_us = payoff.time_products(pairs, chosen, rows, routes[-1])
    assert len(fp32_us) == len(precision_us) == payoff.ROUNDS  # round by round, interleaved
    assert min(fp32_us) > 0 and min(precision_us) > 0


@pytest.mark.parametrize(
    "fp32_us,precision_us,slower",
    [
        ([100.0] * 7, [130.0] * 7, True),  # slower in every round
        ([100.0] * 7, [100.0, 100.0, 400.0, 400.0, 100.0, 100.0, 100.0], False),  # load in two rounds
        ([30.0] + [100.0] * 6, [110.0] * 7, False),  # one lucky fp32 timing: best of N alone would warn
        ([100.0] * 7, [60.0] + [140.0] * 6, False),  # one lucky timing of the precision: not consistent
        ([100.0, 300.0, 100.0, 300.0, 100.0, 300.0, 100.0], [130.0, 390.0, 130.0, 390.0, 130.0, 390.0, 130.0], True),
    ],
)
def test_only_slowness_that_holds_across_rounds_counts(fp32_us, precision_us, slower):
    """Interleaved rounds on a loaded machine: bursts of load in a few rounds, on either side, do not
    make a precision slower than fp32; slowness in the median round and at best does."""
    assert payoff.slower(fp32_us, precision_us) is slower
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        assert payoff.warn_if_slower(INT8, "one sentence", rows=1, fp32_us=fp32_us, precision_us=precision_us) is slower
    assert len(said) == int(slower)


@pytest.fixture
def routes_timed(monkeypatch, tmp_path):
    """The routes' timing replaced by fixed rounds of microseconds per regime: oneDNN's 0.6x torch's
    time in batches, 1.05x one sentence at a time (within the margin): what the choice does with them.
    The choices are kept in a folder of the test's own."""
    monkeypatch.setenv("SPACY_ELMO_KERNELS", str(tmp_path / "kernels"))
    route_cache.forget_warnings()
    payoff.forget_said()
    calls = []

    def fixed(pairs, rows, input_rows):
        calls.append((rows, input_rows))
        torch_us = [100.0, 98.0, 300.0, 101.0, 99.0, 100.0, 102.0]
        factor = 1.05 if rows == 1 else 0.6
        return torch_us, [t * factor for t in torch_us]

    monkeypatch.setattr(payoff, "time_routes", fixed)
    yield calls
    payoff.forget_said()


@pytest.mark.skipif(not prepacked.available(), reason="this torch has no oneDNN linear ops")
def test_fp32_routes_are_chosen_per_regime_once_per_shape_and_recorded(routes_timed):
    fast = optimize_for_inference(random_bilm(seed=2, dim=32, projection_dim=16))
    assert fast.runner.routes == prepacked.Routes(one_sentence=prepacked.TORCH, batch=prepacked.ONEDNN)
    assert routes_timed == [(1, 0), (payoff.ROUTE_ROWS["batch"], payoff.ROUTE_INPUT_ROWS)]
    optimize_for_inference(random_bilm(seed=3, dim=32, projection_dim=16))  # the same shape: not measured again
    assert len(routes_timed) == 2
    (chosen,) = payoff.chosen_routes()
    assert chosen["shape"]["dim"] == 32 and chosen["batch"]["route"] == prepacked.ONEDNN
    assert chosen["batch"]["onednn_speedup_median"] == pytest.approx(1 / 0.6)
    layers(fast, SENTENCES)  # runs on the routes chosen


def test_without_the_measurement_fp32_stays_on_torchs_route(routes_timed, monkeypatch):
    monkeypatch.setenv(payoff.ENV, "0")
    assert optimize_for_inference(random_bilm(seed=2)).runner.routes == prepacked.TORCH_ROUTES
    assert optimize_for_inference(random_bilm(seed=2), exact=True).runner.routes == prepacked.TORCH_ROUTES
    monkeypatch.delenv(payoff.ENV)
    assert optimize_for_inference(random_bilm(seed=2), precision="fp16").runner.routes == prepacked.TORCH_ROUTES
    assert routes_timed == [] and payoff.chosen_routes() == []


@pytest.mark.skipif(not prepacked.available(), reason="this torch has no oneDNN linear ops")
def test_the_choice_is_kept_for_later_processes_and_measured_anew_on_request(routes_timed):
    optimize_for_inference(random_bilm(seed=2, dim=32, projection_dim=16))
    assert len(routes_timed) == 2 and route_cache.path().is_file()
    (chosen,) = payoff.chosen_routes()
    assert chosen["source"] == "measured in this process"
    payoff.forget_said()  # as a new process: the choice comes from the file, unmeasured
    fast = optimize_for_inference(random_bilm(seed=3, dim=32, projection_dim=16))
    assert len(routes_timed) == 2
    assert fast.runner.routes == prepacked.Routes(one_sentence=prepacked.TORCH, batch=prepacked.ONEDNN)
    (kept,) = payoff.chosen_routes()
    assert kept["source"].startswith("kept: ") and kept["batch"] == chosen["batch"]
    with payoff.measuring_anew():
        optimize_for_inference(random_bilm(seed=3, dim=32, projection_dim=16))
    assert len(routes_timed) == 4
    torch.set_num_threads(torch.get_num_threads() + 1)  # another thread count: another entry
    try:
        payoff.forget_said()
        optimize_for_inference(random_bilm(seed=3, dim=32, projection_dim=16))
    finally:
        torch.set_num_threads(torch.get_num_threads() - 1)
    assert len(routes_timed) == 6
    entries = json.loads(route_cache.path().read_text())["entries"]
    assert len(entries) == 2 and all(e["routes"]["batch"] == prepacked.ONEDNN for e in entries.values())


@pytest.mark.skipif(not prepacked.available(), reason="this torch has no oneDNN linear ops")
@pytest.mark.parametrize("content", ["{not json", '{"format": 1, "entries": {"K": NaN}}', '{"format": 9, "entries": {}}', "[]"])
def test_a_damaged_choice_file_is_measured_over_with_a_warning(routes_timed, content):
    route_cache.path().parent.mkdir(parents=True)
    route_cache.path().write_text(content)
    with pytest.warns(RuntimeWarning, match="routes.json"):
        optimize_for_inference(random_bilm(seed=2, dim=32, projection_dim=16))
    assert len(routes_timed) == 2
    document = json.loads(route_cache.path().read_text())
    assert document["format"] == route_cache.FORMAT and len(document["entries"]) == 1


@pytest.mark.skipif(not prepacked.available(), reason="this torch has no oneDNN linear ops")
def test_an_entry_naming_no_route_of_ours_is_measured_over(routes_timed):
    optimize_for_inference(random_bilm(seed=2, dim=32, projection_dim=16))
    document = json.loads(route_cache.path().read_text())
    (entry,) = document["entries"].values()
    entry["routes"]["batch"] = "mkl-turbo"
    route_cache.path().write_text(json.dumps(document))
    payoff.forget_said()
    with pytest.warns(RuntimeWarning, match="does not have"):
        fast = optimize_for_inference(random_bilm(seed=2, dim=32, projection_dim=16))
    assert len(routes_timed) == 4 and fast.runner.routes.batch == prepacked.ONEDNN


@pytest.mark.skipif(not prepacked.available(), reason="this torch has no oneDNN linear ops")
def test_a_folder_that_cannot_be_written_keeps_the_choice_for_the_process(routes_timed, monkeypatch, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("SPACY_ELMO_KERNELS", str(blocker / "kernels"))
    with pytest.warns(RuntimeWarning, match="this process only"):
        fast = optimize_for_inference(random_bilm(seed=2, dim=32, projection_dim=16))
    assert fast.runner.routes.batch == prepacked.ONEDNN


@pytest.mark.skipif(not prepacked.available(), reason="this torch has no oneDNN linear ops")
def test_the_libraries_instruction_switches_key_their_own_choice_and_a_benchmark_keeps_none(routes_timed, monkeypatch):
    optimize_for_inference(random_bilm(seed=2, dim=32, projection_dim=16))
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")  # held to AVX2: the routes may time otherwise
    payoff.forget_said()
    optimize_for_inference(random_bilm(seed=2, dim=32, projection_dim=16))
    assert len(routes_timed) == 4
    entries = json.loads(route_cache.path().read_text())["entries"]
    assert len(entries) == 2 and any("ONEDNN_MAX_CPU_ISA=AVX2" in key for key in entries)
    before = route_cache.path().read_bytes()
    with payoff.measuring_anew(keep=False):
        optimize_for_inference(random_bilm(seed=2, dim=32, projection_dim=16))
    assert len(routes_timed) == 6 and route_cache.path().read_bytes() == before


def test_a_reduced_precision_is_checked_against_fp32_on_the_route_fp32_would_take(measured, monkeypatch):
    routes_seen = []
    fixed = payoff.time_products

    def seen(pairs, precision, rows, fp32_route=prepacked.TORCH):
        routes_seen.append((rows, fp32_route))
        return fixed(pairs, precision, rows, fp32_route)

    monkeypatch.setattr(payoff, "time_products", seen)
    monkeypatch.setattr(payoff, "choose_routes", lambda forward, backward: prepacked.Routes(prepacked.TORCH, prepacked.ONEDNN))
    fast = optimize_for_inference(random_bilm(seed=2, dim=32, projection_dim=16), precision="bf16")
    with pytest.warns(RuntimeWarning, match="on its onednn route"):
        layers(fast, SENTENCES)
    with pytest.warns(RuntimeWarning, match="on its torch route"):
        layers(fast, SENTENCES[:1])
    assert (1, prepacked.TORCH) in routes_seen and any(rows > 1 and route == prepacked.ONEDNN for rows, route in routes_seen)
