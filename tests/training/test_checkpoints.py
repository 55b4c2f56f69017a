import json
import random

import numpy as np
import pytest
import torch

from spacy_elmo.training.checkpoints import (
    LM_NAME,
    latest_checkpoint,
    list_checkpoints,
    read_checkpoint,
    restore_training_state,
    save_checkpoint,
)


def _model_and_optimizer(kind="adagrad"):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Linear(3, 2))
    if kind == "adagrad":
        optimizer = torch.optim.Adagrad(model.parameters(), lr=0.2, initial_accumulator_value=1.0)
    else:
        optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    for _ in range(3):
        loss = model(torch.randn(5, 4)).pow(2).sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return model, optimizer


@pytest.mark.parametrize("kind", ["adagrad", "adam"])
def test_round_trip_restores_weights_optimizer_and_all_rngs(tmp_path, kind):
    model, optimizer = _model_and_optimizer(kind)
    random.seed(5)
    np.random.seed(6)
    torch.manual_seed(7)
    save_checkpoint(tmp_path, step=3, position={"epoch": 1, "batch": 2}, model=model, optimizer=optimizer, extra={"note": "x"})
    expected_draws = (random.random(), np.random.rand(), torch.rand(1).item())

    fresh, fresh_opt = _model_and_optimizer(kind)
    with torch.no_grad():
        for p in fresh.parameters():
            p.add_(1.0)
    checkpoint = latest_checkpoint(tmp_path)
    assert checkpoint.step == 3 and checkpoint.position == {"epoch": 1, "batch": 2} and checkpoint.extra == {"note": "x"}
    restore_training_state(checkpoint, fresh, fresh_opt)
    assert (random.random(), np.random.rand(), torch.rand(1).item()) == expected_draws
    for a, b in zip(model.state_dict().values(), fresh.state_dict().values()):
        assert torch.equal(a, b)
    # the next update is the same as the original optimizer's
    x = torch.randn(5, 4)
    for m, opt in ((model, optimizer), (fresh, fresh_opt)):
        loss = m(x).pow(2).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
    for a, b in zip(model.state_dict().values(), fresh.state_dict().values()):
        assert torch.equal(a, b)


def test_keeps_the_last_k_and_leaves_no_temporary_files(tmp_path):
    model, optimizer = _model_and_optimizer()
    for step in (1, 2, 3, 4):
        save_checkpoint(tmp_path, step=step, position={"epoch": 0, "batch": step}, model=model, optimizer=optimizer, keep=2)
    assert [p.name for p in list_checkpoints(tmp_path)] == ["step-00000003", "step-00000004"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step-00000003", "step-00000004"]
    assert not list(tmp_path.rglob("*.tmp-*"))
    state = json.loads((tmp_path / "step-00000004" / "state.json").read_text())
    assert set(state["sha256"]) == {"lm.safetensors", "training.safetensors"}


@pytest.mark.parametrize("damage", ["flip_byte", "truncate", "delete_state"])
def test_damaged_newest_checkpoint_is_skipped_with_a_warning(tmp_path, damage):
    model, optimizer = _model_and_optimizer()
    save_checkpoint(tmp_path, step=1, position={"epoch": 0, "batch": 1}, model=model, optimizer=optimizer)
    save_checkpoint(tmp_path, step=2, position={"epoch": 0, "batch": 2}, model=model, optimizer=optimizer)
    newest = tmp_path / "step-00000002"
    if damage == "flip_byte":
        data = bytearray((newest / LM_NAME).read_bytes())
        data[-1] ^= 0xFF
        (newest / LM_NAME).write_bytes(bytes(data))
    elif damage == "truncate":
        (newest / LM_NAME).write_bytes((newest / LM_NAME).read_bytes()[:20])
    else:
        (newest / "state.json").unlink()
    with pytest.warns(RuntimeWarning, match="skipping damaged checkpoint"):
        checkpoint = latest_checkpoint(tmp_path)
    assert checkpoint.step == 1
    with pytest.raises(ValueError):
        read_checkpoint(newest)


def test_no_checkpoint(tmp_path):
    assert latest_checkpoint(tmp_path / "none") is None
