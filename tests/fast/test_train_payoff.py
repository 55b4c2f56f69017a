"""Fine-tuning's "auto" precision: bf16 only where the training products run faster in it here,
timed once per machine and kept."""
import json
from pathlib import Path

import pytest
import torch

from spacy_elmo.fast import precision, route_cache, train_payoff

CPU = torch.device("cpu")
FP32_US = [100.0, 98.0, 300.0, 101.0, 99.0, 100.0, 102.0]


@pytest.fixture
def timed(monkeypatch, tmp_path):
    """The products' timing replaced by fixed rounds (bf16 at ``factor`` times fp32's time), on a CPU
    with bf16 arithmetic; the choices kept in a folder of the test's own. Yields the factor setter and
    the calls."""
    monkeypatch.setenv("SPACY_ELMO_KERNELS", str(tmp_path / "kernels"))
    monkeypatch.delenv(train_payoff.ENV, raising=False)
    monkeypatch.setattr(precision, "cpu_has_bf16", lambda: True)
    route_cache.forget_warnings()
    state = {"factor": 1.4, "calls": []}

    def fixed(dim, projection_dim, rows):
        state["calls"].append((dim, projection_dim, rows))
        return list(FP32_US), [t * state["factor"] for t in FP32_US]

    monkeypatch.setattr(train_payoff, "time_products", fixed)
    return state


@pytest.mark.parametrize("factor, expected", [(1.4, "off"), (0.6, "bf16"), (1.0, "bf16")])
def test_auto_takes_bf16_unless_its_products_run_slower_here(timed, factor, expected):
    timed["factor"] = factor
    choice = train_payoff.choose(64, 32, 16, CPU)
    assert choice.autocast == expected and choice.how == train_payoff.MEASURED
    assert choice.speed() == pytest.approx(1 / factor)
    assert f"bf16's training products ran at {1 / factor:.2f}x float32's here; timed now" in choice.note()


def test_the_choice_is_timed_once_per_machine_and_shape_and_kept(timed):
    first = train_payoff.choose(64, 32, 16, CPU)
    timed["factor"] = 0.5  # the machine would now say otherwise: the kept choice holds
    again = train_payoff.choose(64, 32, 16, CPU)
    assert (first.autocast, again.autocast, again.how) == ("off", "off", train_payoff.KEPT)
    assert len(timed["calls"]) == 1
    other = train_payoff.choose(128, 32, 16, CPU)  # another shape is timed anew
    assert other.autocast == "bf16" and len(timed["calls"]) == 2
    entries = json.loads(route_cache.path().read_text())["entries"]
    assert sorted(e["bf16"] for e in entries.values()) == [False, True]


DAMAGED = {
    "not a choice": lambda e: e.update(bf16="fp8"),
    "a choice its timings do not give": lambda e: e.update(bf16=True),
    "timings that are not numbers": lambda e: e["measured"].update(fp32_us=["a"] * 7),
    "a zero timing": lambda e: e["measured"]["bf16_us"].__setitem__(0, 0.0),
    "timings of unequal rounds": lambda e: e["measured"]["bf16_us"].pop(),
    "no rows": lambda e: e["measured"].pop("rows"),
    "no timings": lambda e: e.pop("measured"),
}


@pytest.mark.parametrize("damage", list(DAMAGED))
def test_a_kept_choice_this_version_does_not_write_is_timed_again_with_a_warning(timed, damage):
    assert train_payoff.choose(64, 32, 16, CPU).autocast == "off"
    document = json.loads(route_cache.path().read_text())
    for entry in document["entries"].values():
        DAMAGED[damage](entry)
    route_cache.path().write_text(json.dumps(document))
    with pytest.warns(RuntimeWarning, match="does not read"):
        choice = train_payoff.choose(64, 32, 16, CPU)
    assert (choice.autocast, choice.how) == ("off", train_payoff.MEASURED) and len(timed["calls"]) == 2
    assert train_payoff.choose(64, 32, 16, CPU).how == train_payoff.KEPT  # rewritten whole


def test_a_warning_about_the_kept_choices_names_the_callers_line_not_the_librarys(timed):
    train_payoff.choose(64, 32, 16, CPU)
    route_cache.path().write_text("{not json")
    with pytest.warns(RuntimeWarning, match="not valid JSON") as caught:
        train_payoff.choose(64, 32, 16, CPU)
    assert [Path(w.filename).resolve() for w in caught] == [Path(__file__).resolve()]


def test_a_folder_that_cannot_keep_the_choice_says_so_and_the_choice_holds(timed, monkeypatch, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("SPACY_ELMO_KERNELS", str(blocker / "kernels"))
    with pytest.warns(RuntimeWarning, match="could not keep the training precision"):
        choice = train_payoff.choose(64, 32, 16, CPU)
    assert (choice.autocast, choice.how) == ("off", train_payoff.UNKEPT) and "timed now, not kept" in choice.note()


def test_nothing_is_timed_without_bf16_arithmetic_or_with_the_check_off(timed, monkeypatch):
    monkeypatch.setattr(precision, "cpu_has_bf16", lambda: False)
    assert train_payoff.choose(64, 32, 16, CPU) == train_payoff.Choice(False, train_payoff.ASSUMED, {})
    monkeypatch.setattr(precision, "cpu_has_bf16", lambda: True)
    monkeypatch.setenv(train_payoff.ENV, "0")
    choice = train_payoff.choose(64, 32, 16, CPU)
    assert (choice.autocast, choice.how) == ("bf16", train_payoff.SWITCHED_OFF) and not timed["calls"]
    assert "not timed, SPACY_ELMO_PRECISION_CHECK=0" in choice.note()


@pytest.mark.skipif(not precision.cpu_has_bf16(), reason="this CPU has no bf16 arithmetic")
def test_the_timed_products_are_the_training_steps_own(monkeypatch):
    """The real timing: every round of both precisions timed, and the float32 run computes the four
    products of a timestep (the cast operands' within bf16's rounding of them)."""
    fp32_us, bf16_us = train_payoff.time_products(32, 16, 8)
    assert len(fp32_us) == len(bf16_us) == train_payoff.ROUNDS and min(fp32_us + bf16_us) > 0
    seen = []
    original = torch.mm
    monkeypatch.setattr(torch, "mm", lambda a, b, **k: seen.append((tuple(a.shape), tuple(b.shape), a.dtype)) or original(a, b, **k))
    train_payoff.step_products(32, 16, 8, None)()
    train_payoff.step_products(32, 16, 8, torch.bfloat16)()
    shapes = [(8, 16), (16, 128)], [(8, 32), (32, 16)], [(8, 16), (16, 32)], [(8, 128), (128, 16)]
    assert [(a, b) for a, b, _ in seen] == [tuple(s) for s in shapes] * 2
    assert [d for _, _, d in seen] == [torch.float32] * 4 + [torch.bfloat16] * 4
