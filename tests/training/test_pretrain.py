import json
import math

import numpy as np
import pytest
import spacy
import torch

from spacy_elmo import load_bilm
from spacy_elmo.io import export_allennlp, load_allennlp
from spacy_elmo.architectures import bilm_model_config
from spacy_elmo.training.corpus import Corpus
from spacy_elmo.training.model_dir import load_lm_parts
from spacy_elmo.training.perplexity import evaluate_perplexity
from spacy_elmo.training.counting import count_corpus
from spacy_elmo.training.pretrain import pretrain
from spacy_elmo.bilm.softmax import WordSoftmax
from spacy_elmo.training.lm import LanguageModel, init_for_training
from spacy_elmo.bilm import BiLM

from .conftest import tiny_config


def summary_steps_per_epoch(out):
    return json.loads((out / "corpus-stats.json").read_text())["batches"]


def _records(out, kind):
    lines = (out / "metrics.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, lines) if r["kind"] == kind]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A tiny biLM pretrained on the grammar corpus for 3 epochs (shared by the checks below)."""
    from .conftest import write_corpus

    root = tmp_path_factory.mktemp("pretrain")
    train, dev = write_corpus(root / "train.txt", 400, seed=1), write_corpus(root / "dev.txt", 60, seed=2)
    config = tiny_config(train, dev, training__max_epochs=3, training__dropout=0.0, training__eval_frequency=25, training__log_frequency=1)
    summary = pretrain(config, root / "out")
    return config, summary, root / "out", train


def test_loss_falls_and_held_out_perplexity_drops(trained):
    config, summary, out, _ = trained
    train = _records(out, "train")
    evals = _records(out, "eval")
    assert summary.stopped_by == "max_epochs" and summary.epochs_done == 3
    vocab_size = len((out / "vocab.txt").read_text().splitlines())
    # from about uniform over the vocabulary (step 1) to near the grammar's entropy
    assert train[0]["loss"] > math.log(vocab_size) - 0.3
    assert train[-1]["loss"] < train[0]["loss"] - 0.5
    assert len(evals) >= 3 and evals[-1]["dev_ppl"] < 0.6 * vocab_size
    assert evals[-1]["dev_ppl"] < evals[0]["dev_ppl"]
    assert all(math.isfinite(e["forward_ppl"]) and math.isfinite(e["backward_ppl"]) for e in evals)
    # the geometric mean of the two directions
    last = evals[-1]
    assert last["ppl"] == pytest.approx(math.sqrt(last["forward_ppl"] * last["backward_ppl"]), rel=1e-9)
    assert summary.best_dev["ppl"] == pytest.approx(min(e["ppl"] for e in evals))


def test_perplexity_matches_the_training_loss(trained):
    """Full softmax, no dropout: the exact perplexity on the training text is close to exp(training loss)."""
    config, _, out, train = trained
    bilm, vocab, weights = load_lm_parts(out / "model-last")
    softmax = WordSoftmax(len(vocab), bilm.config.projection_dim)
    softmax.load_state_dict(weights)
    result = evaluate_perplexity(LanguageModel(bilm, softmax), Corpus(train).segments(), vocab)
    # the mean loss over the last epoch (records are per step here)
    last_epoch = _records(out, "train")[-summary_steps_per_epoch(out):]
    last_loss = sum(r["loss"] for r in last_epoch) / len(last_epoch)
    assert math.isfinite(result.mean)
    assert abs(math.log(result.mean) - last_loss) < 0.3
    assert result.n_forward == result.n_backward == sum(len(s) + 1 for s in Corpus(train).segments())


def test_steps_are_derived_from_the_data(trained):
    config, summary, out, train = trained
    counted = count_corpus(Corpus(train), config)
    stats = json.loads((out / "corpus-stats.json").read_text())
    assert stats["batches"] == counted.batches > 0 and stats["segments"] == 400
    assert summary.steps == 3 * counted.batches


def test_output_directories_load_everywhere(trained, tmp_path):
    _, _, out, _ = trained
    for name in ("model-last", "model-best"):
        bilm = load_bilm(out / name)
        assert (out / name / "vocab.txt").is_file() and (out / name / "softmax.safetensors").is_file()
        vectors = bilm.embed([["the", "cat", "sees", "the", "dog"]])
        assert vectors[0].shape == (3, 5, 2 * bilm.config.projection_dim)
    assert (out / "learning-curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # the elmo component imports it
    nlp = spacy.blank("en")
    elmo = nlp.add_pipe("elmo", config={"model": bilm_model_config(bilm.config)})
    elmo.initialize(lambda: [], nlp=nlp, model=out / "model-best")
    doc = nlp("the cat sees the dog")
    assert doc._.elmo.layers.shape[:2] == (3, 5)
    # and the published format round-trips it
    export_allennlp(bilm, tmp_path / "options.json", tmp_path / "weights.hdf5")
    again = load_allennlp(tmp_path / "options.json", tmp_path / "weights.hdf5")
    assert np.allclose(again.embed([["a", "dog"]])[0], bilm.embed([["a", "dog"]])[0], atol=1e-6)


def test_existing_checkpoints_need_resume(trained):
    config, _, out, _ = trained
    with pytest.raises(FileExistsError, match="--resume"):
        pretrain(config, out)


def test_sampled_softmax_training_lowers_full_softmax_perplexity(lm_corpus, tmp_path):
    train, dev = lm_corpus
    config = tiny_config(train, dev, softmax__n_samples=8, training__max_epochs=4, training__eval_frequency=1000)
    summary = pretrain(config, tmp_path / "out")
    assert len(_records(tmp_path / "out", "eval")) == 1
    bilm, vocab, _ = load_lm_parts(tmp_path / "out" / "model-last")
    assert len(vocab) > 3 * 8
    torch.manual_seed(0)
    untrained = LanguageModel(init_for_training(BiLM(bilm.config)), WordSoftmax(len(vocab), bilm.config.projection_dim))
    before = evaluate_perplexity(untrained, Corpus(dev).segments(), vocab).mean
    assert summary.best_dev["ppl"] < 0.6 * before


def test_windows_mode_trains(lm_corpus, tmp_path):
    train, dev = lm_corpus
    config = tiny_config(train, dev, training__mode="windows", training__batch_size=8, training__max_epochs=1, training__log_frequency=2)
    summary = pretrain(config, tmp_path / "out")
    train_records = _records(tmp_path / "out", "train")
    assert summary.steps > 15 and train_records[-1]["loss"] < train_records[0]["loss"]
