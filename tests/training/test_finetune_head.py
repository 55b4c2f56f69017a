"""Fine-tuning a published model with its own softmax: it starts at the perplexity `evaluate` gives
that head on the domain text and lowers it."""
import importlib

import pytest

from spacy_elmo.training.corpus import Corpus
from spacy_elmo.training.finetune import finetune
from spacy_elmo.training.head import load_scoring_lm
from spacy_elmo.training.lm import LanguageModel
from spacy_elmo.training.perplexity import evaluate_perplexity
from spacy_elmo.training.vocab import Vocab

from ..published_head import write_published_head
from .conftest import ADJECTIVES, NOUNS, RING, VERBS, tiny_config, write_corpus

# the module (``spacy_elmo.training.finetune`` the attribute is the function)
finetune_module = importlib.import_module("spacy_elmo.training.finetune")
DOMAIN_WORDS = (*RING, *NOUNS, *ADJECTIVES, *VERBS, "the", ".")


@pytest.mark.parametrize("sampled", [False, True])
def test_finetune_starts_at_the_published_heads_perplexity_and_lowers_it(tmp_path, monkeypatch, sampled):
    model = write_published_head(tmp_path / "pub", words=DOMAIN_WORDS)
    train, dev = write_corpus(tmp_path / "train.txt", 200, seed=3), write_corpus(tmp_path / "dev.txt", 30, seed=4)
    if sampled:  # a head above the bound trains with the sampled softmax (8 candidates here)
        monkeypatch.setattr(finetune_module, "SAMPLED_ABOVE", 10)
        monkeypatch.setattr(finetune_module, "PUBLISHED_SAMPLES", 8)
    config = tiny_config(train, dev, training__max_steps=16, training__eval_frequency=8)
    built = []
    monkeypatch.setattr(finetune_module, "LanguageModel", lambda bilm, softmax, **kw: built.append(softmax) or
                        LanguageModel(bilm, softmax, **kw))
    result = finetune(config, tmp_path / "ft", model=model)
    assert [softmax.is_sampled for softmax in built] == [sampled]
    lm, vocab, _ = load_scoring_lm(model)
    expected = evaluate_perplexity(lm, Corpus(str(dev)).segments(), vocab)
    assert not result.new_softmax and result.before["softmax"] == "given"
    assert result.before["ppl"] == pytest.approx(expected.mean, rel=1e-5)
    assert result.after["ppl"] < 0.9 * result.before["ppl"]
    assert Vocab.from_disk(tmp_path / "ft" / "model-best").tokens == vocab.tokens  # the whole head kept
