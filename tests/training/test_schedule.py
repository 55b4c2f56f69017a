import json
import math

import pytest

from spacy_elmo.training.config import TrainingSettings
from spacy_elmo.training.loop import learning_rate_at
from spacy_elmo.training.pretrain import pretrain

from .conftest import tiny_config, write_corpus


def test_warmup_rises_linearly_then_inverse_sqrt_decays():
    settings = TrainingSettings(optimizer="adam", learning_rate=0.002, warmup_steps=100, lr_schedule="inverse_sqrt")
    assert learning_rate_at(1, settings) == pytest.approx(0.002 / 100)
    assert learning_rate_at(50, settings) == pytest.approx(0.001)
    assert learning_rate_at(100, settings) == pytest.approx(0.002)
    assert learning_rate_at(400, settings) == pytest.approx(0.001)
    constant = TrainingSettings(learning_rate=0.2, warmup_steps=10)
    assert learning_rate_at(5, constant) == pytest.approx(0.1)
    assert learning_rate_at(1000, constant) == pytest.approx(0.2)
    assert learning_rate_at(7, TrainingSettings(learning_rate=0.2)) == 0.2


@pytest.mark.parametrize("bad", [{"lr_schedule": "cosine"}, {"autocast": "fp8"}, {"warmup_steps": -1}])
def test_bad_schedule_or_autocast_settings_are_refused(bad):
    with pytest.raises(ValueError, match="training\\."):
        TrainingSettings(**bad)


def test_the_former_training_precision_key_is_read_as_autocast_with_a_deprecation_warning(tmp_path):
    train = write_corpus(tmp_path / "train.txt", 5)
    for old, new in (("bf16", "bf16"), ("fp32", "off")):
        with pytest.warns(DeprecationWarning, match=r"\[training\] precision is now named autocast"):
            assert tiny_config(train, training__precision=old).training.autocast == new
    with pytest.raises(ValueError, match="both autocast and precision"):
        tiny_config(train, training__precision="bf16", training__autocast="bf16")
    with pytest.warns(DeprecationWarning), pytest.raises(ValueError, match="training.autocast must be one of .*, not 'fp8'"):
        tiny_config(train, training__precision="fp8")


def _train_records(out):
    return [r for r in map(json.loads, (out / "metrics.jsonl").read_text().splitlines()) if r["kind"] == "train"]


def test_bf16_autocast_training_learns_like_fp32(tmp_path):
    """The bf16 step trains the same tiny model to a loss close to the fp32 one (weights stay fp32)."""
    train, dev = write_corpus(tmp_path / "train.txt", 300, seed=1), write_corpus(tmp_path / "dev.txt", 40, seed=2)
    losses = {}
    for autocast in ("off", "bf16"):
        config = tiny_config(
            train, dev, training__max_epochs=2, training__dropout=0.0, training__eval_frequency=1000,
            training__log_frequency=1, training__autocast=autocast, training__optimizer="adam",
            training__learning_rate=0.01, training__warmup_steps=5,
        )
        summary = pretrain(config, tmp_path / autocast)
        records = _train_records(tmp_path / autocast)
        assert all(math.isfinite(r["loss"]) for r in records)
        losses[autocast] = (records[0]["loss"], records[-1]["loss"], summary.best_dev["ppl"])
    assert losses["bf16"][1] < losses["bf16"][0] - 0.5
    assert losses["bf16"][2] == pytest.approx(losses["off"][2], rel=0.25)
    # the setting took effect: bf16 rounding moves the losses
    assert losses["bf16"] != losses["off"]


def test_the_loop_steps_with_the_scheduled_rate_and_a_checkpoint_keeps_it(tmp_path):
    train = write_corpus(tmp_path / "train.txt", 200, seed=1)
    config = tiny_config(
        train, training__max_steps=9, training__checkpoint_frequency=3, training__optimizer="adam",
        training__learning_rate=0.01, training__warmup_steps=4, training__lr_schedule="inverse_sqrt",
    )
    pretrain(config, tmp_path / "out")
    for step in (3, 9):
        state = json.loads((tmp_path / "out" / "checkpoints" / f"step-{step:08d}" / "state.json").read_text())
        group = state["optimizer"]["param_groups"][0]
        assert group["lr"] == pytest.approx(learning_rate_at(step, config.training))
        assert group["initial_lr"] == pytest.approx(0.01)
