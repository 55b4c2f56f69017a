from dataclasses import replace

import pytest
import torch

from spacy_elmo.bilm import BiLM
from spacy_elmo.bilm.softmax import WordSoftmax
from spacy_elmo.training.batches import sentence_batch
from spacy_elmo.training.lm import LanguageModel, init_for_training
from spacy_elmo.training.loop import gradient_scaler, learning_rate_at, make_optimizer, train_step
from spacy_elmo.training.setup import check_autocast_device
from spacy_elmo.training.vocab import Vocab

from .conftest import grammar_sentences, tiny_config

SENTENCES = grammar_sentences(6, seed=3)
VOCAB = Vocab(sorted({word for sentence in SENTENCES for word in sentence}))


def tiny_lm(config):
    torch.manual_seed(0)
    bilm = init_for_training(BiLM(config.model))
    return LanguageModel(bilm, WordSoftmax(len(VOCAB), config.model.projection_dim))


def scheduled_optimizer(lm, settings):
    """The run's optimizer, its groups holding the schedule's base rate as a run's restore sets it."""
    optimizer = make_optimizer(lm.parameters(), settings)
    for group in optimizer.param_groups:
        group.setdefault("initial_lr", group["lr"])
    return optimizer


def test_a_step_uses_the_scheduled_rate_and_reports_the_mean_token_loss_it_had_before_the_update(tmp_path):
    config = tiny_config(tmp_path / "unused.txt", training__warmup_steps=4, training__grad_clip=1.0)
    settings = replace(config.training, dropout=0.0)
    lm = tiny_lm(config)
    batch = sentence_batch(SENTENCES, VOCAB, lm.bilm.config.max_characters_per_token)
    optimizer = scheduled_optimizer(lm, settings)
    lm.eval()
    with torch.no_grad():
        before = lm.run_batch(batch)
    expected = 0.5 * (before["forward_nll"] / before["forward_n"] + before["backward_nll"] / before["backward_n"])
    weights = [p.detach().clone() for p in lm.parameters()]

    out, loss = train_step(lm, batch, optimizer=optimizer, settings=settings, step=2)

    assert [g["lr"] for g in optimizer.param_groups] == [learning_rate_at(3, settings)]
    assert float(loss.detach()) == pytest.approx(float(expected), rel=1e-5)
    assert out["forward_n"] == before["forward_n"] == sum(len(s) + 1 for s in SENTENCES)
    assert any(not torch.equal(w, p) for w, p in zip(weights, lm.parameters()))


def test_a_float16_step_scales_the_objective_unscales_before_clipping_and_steps_with_its_scaler(tmp_path, monkeypatch):
    """float16 autocast's step (a GPU's, run here on CPU autocast): the scaler multiplies the loss,
    the clip sees the true gradients, and a finite step updates the weights and keeps the scale."""
    config = tiny_config(tmp_path / "unused.txt", training__autocast="fp16", training__grad_clip=1.0)
    settings = replace(config.training, dropout=0.0)
    lm = tiny_lm(config)
    batch = sentence_batch(SENTENCES, VOCAB, lm.bilm.config.max_characters_per_token)
    optimizer = scheduled_optimizer(lm, settings)
    scaler = gradient_scaler(settings, torch.device("cpu"))
    assert scaler is not None and gradient_scaler(replace(settings, autocast="bf16"), torch.device("cpu")) is None
    weights = [p.detach().clone() for p in lm.parameters()]
    clipped = []
    original_clip = torch.nn.utils.clip_grad_norm_

    def record_clip(parameters, max_norm):
        parameters = list(parameters)
        clipped.append(float(torch.norm(torch.stack([p.grad.norm() for p in parameters if p.grad is not None]))))
        return original_clip(parameters, max_norm)

    monkeypatch.setattr(torch.nn.utils, "clip_grad_norm_", record_clip)
    _, loss = train_step(lm, batch, optimizer=optimizer, settings=settings, step=0, scaler=scaler)
    assert torch.isfinite(loss)
    # unscaled: the true gradient's norm, not 65536 times it
    assert 0 < clipped[0] < 1e3
    assert scaler.get_scale() == 65536.0
    assert any(not torch.equal(w, p) for w, p in zip(weights, lm.parameters()))


def test_float16_autocast_is_refused_off_a_gpu_with_what_to_use_instead():
    with pytest.raises(ValueError, match='autocast "fp16" runs on a GPU only.*"bf16" or "off"'):
        check_autocast_device("fp16", torch.device("cpu"))
    check_autocast_device("bf16", torch.device("cpu"))
    check_autocast_device("fp16", torch.device("cuda"))


def test_what_model_best_is_at_ctrl_c_is_said_where_no_evaluation_chose_it():
    from spacy_elmo.training.loop import RunSummary, best_at_interrupt

    assert best_at_interrupt(RunSummary(stopped_by="interrupted", best_dev={"ppl": 9.0, "step": 4}), True) == ""
    assert "unevaluated" in best_at_interrupt(RunSummary(stopped_by="interrupted"), True)
    assert "no held-out text" in best_at_interrupt(RunSummary(stopped_by="interrupted"), False)
