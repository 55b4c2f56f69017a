import subprocess
import sys

import torch

from spacy_elmo.training.finetune import finetune
from spacy_elmo.training.model_dir import SOFTMAX_NAME, load_lm_parts
from spacy_elmo.training.pretrain import pretrain

from .conftest import ROOT, tiny_config


def test_a_float16_softmax_reads_back_as_float32_and_finetuning_needs_no_warm_up(lm_corpus, tmp_path):
    """lab/release/ship_model.py stores the softmax in float16 (the shipped model's training-only part)."""
    train, dev = lm_corpus
    pretrain(tiny_config(train, dev, training__max_epochs=1), tmp_path / "pre")
    source = tmp_path / "pre" / "model-best"
    done = subprocess.run(
        [sys.executable, "-m", "lab.release.ship_model", "--model", str(source), "--output", str(tmp_path / "shipped")],
        capture_output=True, text=True, cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "shipped" / SOFTMAX_NAME).stat().st_size < 0.6 * (source / SOFTMAX_NAME).stat().st_size
    _, vocab, original = load_lm_parts(source)
    bilm, shipped_vocab, halved = load_lm_parts(tmp_path / "shipped")
    assert shipped_vocab.tokens == vocab.tokens and halved["weight"].dtype == torch.float32
    torch.testing.assert_close(halved["weight"], original["weight"], atol=2e-3, rtol=1e-3)
    assert torch.equal(bilm.state_dict()["token_encoder.char_embedding.weight"],
                       load_lm_parts(source)[0].state_dict()["token_encoder.char_embedding.weight"])
    result = finetune(tiny_config(train, dev, training__max_steps=2, training__eval_frequency=2), tmp_path / "ft",
                      model=tmp_path / "shipped")
    assert not result.new_softmax
    assert abs(result.before["ppl"] - load_before(source, train, dev, tmp_path)) < 0.01 * result.before["ppl"]


def load_before(source, train, dev, tmp_path):
    """The held-out perplexity the float32 original starts fine-tuning from."""
    result = finetune(tiny_config(train, dev, training__max_steps=1, training__eval_frequency=1), tmp_path / "ft32", model=source)
    return result.before["ppl"]


def test_load_lm_scores_text_as_the_saved_model_and_refuses_a_directory_without_softmax(tmp_path):
    import pytest

    from spacy_elmo.bilm import BiLM
    from spacy_elmo.bilm.softmax import WordSoftmax
    from spacy_elmo.io import save_bilm
    from spacy_elmo.training.lm import LanguageModel, init_for_training
    from spacy_elmo.training.model_dir import load_lm, save_lm, trained_max_sentence_tokens
    from spacy_elmo.training.perplexity import corpus_perplexity, evaluate_perplexity
    from spacy_elmo.training.vocab import Vocab

    from .conftest import grammar_sentences, write_corpus

    config = tiny_config(tmp_path / "unused.txt")
    vocab = Vocab(sorted({word for sentence in grammar_sentences(50) for word in sentence}))
    torch.manual_seed(0)
    lm = LanguageModel(init_for_training(BiLM(config.model)), WordSoftmax(len(vocab), config.model.projection_dim))
    save_lm(lm, vocab, tmp_path / "model", extra={"training_config": {"corpus": {"max_sentence_tokens": 5}}})
    loaded, loaded_vocab = load_lm(tmp_path / "model")
    assert loaded_vocab.tokens == vocab.tokens and trained_max_sentence_tokens(tmp_path / "model") == 5

    data = write_corpus(tmp_path / "held-out.txt", 12, seed=4)
    result, stats = corpus_perplexity(loaded, loaded_vocab, str(data), max_sentence_tokens=5, max_segments=10)
    segments = [s[i : i + 5] for s in grammar_sentences(12, seed=4) for i in range(0, len(s), 5)][:10]
    assert result == evaluate_perplexity(lm, segments, vocab)
    assert result.n_words == sum(len(s) for s in segments)
    assert stats.lines < 12  # reading stops once max_segments are scored

    save_bilm(lm.bilm, tmp_path / "bare")
    assert trained_max_sentence_tokens(tmp_path / "bare") == 64
    with pytest.raises(ValueError, match="fine-tune it first"):
        load_lm(tmp_path / "bare")
