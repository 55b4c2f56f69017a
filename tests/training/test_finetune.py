import hashlib
import json

import pytest
import torch

from spacy_elmo.bilm.softmax import WordSoftmax
from spacy_elmo.io import ModelFileError, load_allennlp, load_native
from spacy_elmo.io import loading
from spacy_elmo.io.loading import shipped_model_dir
from spacy_elmo.pipeline import create_pipeline
from spacy_elmo.training.lm import LanguageModel
from spacy_elmo.training.model_dir import load_lm_parts
from spacy_elmo.training.perplexity import evaluate_perplexity
from spacy_elmo.training.finetune import finetune
from spacy_elmo.training.pretrain import pretrain
from spacy_elmo.training.vocab import Vocab

from .conftest import TINY_CFG, tiny_config

ROOT_DATA = TINY_CFG.parents[1] / "tests" / "data" / "allennlp" / "tiny"


def _domain(tmp_path, n, name):
    """Another 'domain': the same words in new patterns (the ring counted backwards, in pairs)."""
    ring = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven"]
    lines = []
    for i in range(n):
        start = (i * 5) % len(ring)
        words = [ring[(start - k) % len(ring)] for k in range(4 + i % 4)]
        lines.append(" ".join(w for w in words for _ in range(2)))
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_finetune_our_model_keeps_its_vocabulary_and_lowers_domain_perplexity(lm_corpus, tmp_path):
    train, dev = lm_corpus
    pretrain(tiny_config(train, dev, training__max_epochs=1), tmp_path / "pre")
    domain_train, domain_dev = _domain(tmp_path, 200, "d-train.txt"), _domain(tmp_path, 30, "d-dev.txt")
    config = tiny_config(domain_train, domain_dev, training__max_steps=40, training__eval_frequency=20)
    result = finetune(config, tmp_path / "ft", model=tmp_path / "pre" / "model-best")
    assert not result.new_softmax
    assert Vocab.from_disk(tmp_path / "ft" / "model-best").tokens == Vocab.from_disk(tmp_path / "pre" / "model-best").tokens
    assert result.after["ppl"] < 0.7 * result.before["ppl"]
    report = json.loads((tmp_path / "ft" / "finetune-report.json").read_text())
    assert report["before"]["ppl"] == pytest.approx(result.before["ppl"]) and report["after_best"]["ppl"] == pytest.approx(result.after["ppl"])
    weights = hashlib.sha256((tmp_path / "pre" / "model-best" / "model.safetensors").read_bytes()).hexdigest()
    assert report["provenance"]["model"]["weights_sha256"] == weights  # the model it started from
    assert len(report["provenance"]["data"]) == 2  # train and dev
    # the weights it left, and where this invocation began (tokens and seconds are from there)
    for name in ("model-best", "model-last"):
        written = hashlib.sha256((tmp_path / "ft" / name / "model.safetensors").read_bytes()).hexdigest()
        assert report["weights_sha256"][name] == written
    assert report["start_step"] == 0 and report["steps"] == 40
    assert load_native(tmp_path / "ft" / "model-last").config == load_native(tmp_path / "pre" / "model-best").config


def test_finetune_a_published_pair_builds_and_warms_up_a_softmax(tmp_path):
    domain_train, domain_dev = _domain(tmp_path, 200, "d-train.txt"), _domain(tmp_path, 30, "d-dev.txt")
    options, weights = ROOT_DATA / "options.json", ROOT_DATA / "weights.hdf5"
    config = tiny_config(domain_train, domain_dev, training__max_steps=80, training__eval_frequency=20, finetune__warmup_steps=10)
    result = finetune(config, tmp_path / "ft", options=options, weights=weights)
    assert result.new_softmax and result.after["ppl"] < result.before["ppl"]
    vocab = Vocab.from_disk(tmp_path / "ft")
    assert "eleven" in vocab and len(vocab) == 3 + 12
    # the warm-up trained the softmax only: the biLM left it as imported
    original = load_allennlp(options, weights).state_dict()
    warmed = load_native(tmp_path / "ft" / "warmup" / "model-last").state_dict()
    for name, value in original.items():
        assert torch.equal(value, warmed[name]), name
    tuned = load_native(tmp_path / "ft" / "model-last").state_dict()
    assert any(not torch.equal(original[name], tuned[name]) for name in original)
    # "before" is the imported biLM's perplexity with its warmed-up softmax, not a random head's
    assert result.before["softmax"] == "warmed up"
    bilm, vocab, head = load_lm_parts(tmp_path / "ft" / "warmup" / "model-last")
    softmax = WordSoftmax(len(vocab), bilm.config.projection_dim)
    softmax.load_state_dict(head)
    lines = [line.split() for line in domain_dev.read_text(encoding="utf-8").splitlines()]
    warmed_ppl = evaluate_perplexity(LanguageModel(bilm, softmax), lines, vocab).to_dict()["ppl"]
    assert result.before["ppl"] == pytest.approx(warmed_ppl, rel=1e-4)


def test_finetune_starts_from_a_pipeline_directory_with_a_new_softmax(tmp_path):
    options, weights = ROOT_DATA / "options.json", ROOT_DATA / "weights.hdf5"
    create_pipeline(load_allennlp(options, weights)).to_disk(tmp_path / "pipeline")
    bilm, vocab, head = load_lm_parts(tmp_path / "pipeline")
    assert vocab is None and head is None and _same_weights(bilm, load_allennlp(options, weights))
    domain_train, domain_dev = _domain(tmp_path, 40, "d-train.txt"), _domain(tmp_path, 10, "d-dev.txt")
    config = tiny_config(domain_train, domain_dev, training__max_steps=2, training__eval_frequency=2)
    result = finetune(config, tmp_path / "ft", model=tmp_path / "pipeline")
    assert result.new_softmax and result.summary.steps == 2
    assert load_native(tmp_path / "ft" / "model-last").config == bilm.config


def test_finetune_starts_from_the_shipped_biLM_with_its_vocabulary_and_softmax():
    bilm, vocab, head = load_lm_parts()
    assert _same_weights(bilm, load_native(shipped_model_dir()))
    assert vocab is not None and head["weight"].shape == (len(vocab), bilm.config.projection_dim)


def test_finetune_refuses_a_mistyped_start_naming_it_without_downloading(lm_corpus, tmp_path, monkeypatch):
    monkeypatch.setattr(loading, "fetch_published", lambda *a, **k: pytest.fail(f"download asked for: {a}"))
    train, dev = lm_corpus
    typo = str(tmp_path / "pre" / "modle-best")
    with pytest.raises(ModelFileError, match="no such file or directory") as err:
        finetune(tiny_config(train, dev), tmp_path / "ft", model=typo)
    assert err.value.path == typo
    with pytest.raises(ValueError, match="^finetune: options and weights must both be given"):
        finetune(tiny_config(train, dev), tmp_path / "ft2", options=ROOT_DATA / "options.json")


def _same_weights(a, b) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


EFML_MODEL = TINY_CFG.parents[1] / "tests" / "data" / "elmoformanylangs" / "model"


def test_finetune_an_elmoformanylangs_model_on_its_own_ids_with_a_new_softmax(tmp_path):
    from spacy_elmo.io import load_efml

    domain_train, domain_dev = _domain(tmp_path, 200, "d-train.txt"), _domain(tmp_path, 30, "d-dev.txt")
    config = tiny_config(domain_train, domain_dev, training__max_steps=60, training__eval_frequency=20,
                         finetune__warmup_steps=10)
    result = finetune(config, tmp_path / "ft", model=EFML_MODEL)
    assert result.new_softmax and result.after["ppl"] < result.before["ppl"]
    imported, tuned = load_efml(EFML_MODEL), load_native(tmp_path / "ft" / "model-best")
    assert tuned.char_vocab.to_json() == imported.char_vocab.to_json()  # the learned vocabulary travels with it
    assert any(not torch.equal(value, tuned.state_dict()[name]) for name, value in imported.state_dict().items())
    sentence = [["zero", "eleven", "ten", "Москва"]]
    assert tuned.embed(sentence)[0].shape == imported.embed(sentence)[0].shape
    with pytest.raises(ValueError, match='training.mode = "sentences"'):
        finetune(tiny_config(domain_train, domain_dev, training__max_steps=2, training__mode="windows"),
                 tmp_path / "ft-windows", model=EFML_MODEL)
