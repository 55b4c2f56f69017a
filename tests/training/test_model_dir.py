import subprocess
import sys

import torch

from spacy_elmo.training.finetune import finetune
from spacy_elmo.training.model_dir import SOFTMAX_NAME, load_lm_parts
from spacy_elmo.training.pretrain import pretrain

from .conftest import ROOT, tiny_config


def test_a_float16_softmax_reads_back_as_float32_and_finetuning_needs_no_warm_up(lm_corpus, tmp_path):
    """scripts/ship_model.py stores the softmax in float16 (the shipped model's training-only part)."""
    train, dev = lm_corpus
    pretrain(tiny_config(train, dev, training__max_epochs=1), tmp_path / "pre")
    source = tmp_path / "pre" / "model-best"
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "ship_model.py"), "--model", str(source), "--output", str(tmp_path / "shipped")],
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
