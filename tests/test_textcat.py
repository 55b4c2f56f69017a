"""Real `spacy train` runs of text classifiers with and without ELMo (see training_runs), and reviews
as long as the movie reviews' longest through a trained elmo + textcat pipeline."""
import numpy as np
import pytest
import spacy
import torch
from spacy.tokens import DocBin
from spacy.training import Example

from .training_runs import CONFIGS, make_textcat_data, tiny_bilm, train

pytestmark = pytest.mark.slow
# the classifiers learn the cue words in 60-80 steps (the tagger tests' 40 are too few)
STEPS = {"training.max_steps": 80, "training.eval_frequency": 80}


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return make_textcat_data(tmp_path_factory.mktemp("textcat"))


@pytest.fixture(scope="module")
def frozen(data):
    return train(CONFIGS / "textcat-elmo.cfg", data, data / "frozen", **STEPS)


@pytest.fixture(scope="module")
def tuned(data):
    trainable = {"components.elmo.model.trainable": True}
    return train(CONFIGS / "textcat-elmo.cfg", data, data / "tuned", **STEPS, **trainable)


def _accuracy(nlp, data):
    gold = list(DocBin().from_disk(data / "dev.spacy").get_docs(nlp.vocab))
    predicted = nlp.pipe(doc.text for doc in gold)
    return np.mean([max(p.cats, key=p.cats.get) == max(g.cats, key=g.cats.get) for p, g in zip(predicted, gold)])


def _bilm_params(nlp):
    return {k: v.detach().clone() for k, v in nlp.get_pipe("elmo").bilm.state_dict().items()}


def _long_text(n_tokens):
    # no sentence-final punctuation: the sentencizer leaves one sentence for the windows to cut
    words = "the film was wonderful and the cast and the score and the sets".split()
    return " ".join(words[i % len(words)] for i in range(n_tokens))


def _record_batches(nlp):
    """(sentences, positions) of every forward pass of the pipeline's biLM, and the hook's handle."""
    shapes = []
    hook = nlp.get_pipe("elmo").bilm.register_forward_pre_hook(lambda _, args: shapes.append(args[0].shape[:2]))
    return shapes, hook


def test_plain_and_elmo_classifiers_learn_and_load_from_disk(data, frozen):
    plain = train(CONFIGS / "textcat.cfg", data, data / "plain", **STEPS)
    assert plain.pipe_names == ["sentencizer", "textcat"]
    assert frozen.pipe_names == ["sentencizer", "elmo", "textcat"]
    for nlp in (plain, frozen):
        doc = nlp("We saw it on Sunday. The film was awful.")
        assert set(doc.cats) == {"pos", "neg"} and sum(doc.cats.values()) == pytest.approx(1.0)
        # 20 unseen Docs: chance is 0.5
        assert _accuracy(nlp, data) >= 0.8


def test_classification_reads_doc_elmo_through_a_trained_mix(frozen):
    textcat = frozen.get_pipe("textcat")
    doc = frozen("We saw it on Sunday. The film was wonderful.")
    assert [tuple(s) for s in doc._.elmo.segments] == [(0, 6), (6, 11)]  # the sentencizer's sentences
    scores = textcat.model.predict([doc]).copy()
    doc._.elmo.layers = np.zeros_like(doc._.elmo.layers)
    assert not np.allclose(scores, textcat.model.predict([doc]))
    tok2vec = next(node for node in textcat.model.walk() if node.name == "elmo_tok2vec")
    assert tok2vec.get_ref("input_mix").get_param("weights").any()


def test_biLM_changes_only_when_fine_tuning_is_asked_for(data, frozen, tuned):
    original = tiny_bilm().state_dict()
    for name, value in _bilm_params(frozen).items():
        assert torch.equal(value, original[name]), name
    changed = [name for name, value in _bilm_params(tuned).items() if not torch.equal(value, original[name])]
    assert len(changed) > len(original) // 2
    assert _accuracy(tuned, data) >= 0.8


def test_a_1000_token_review_runs_in_windows_and_bounded_batches(frozen, tuned):
    elmo = frozen.get_pipe("elmo").model
    max_window, max_items = elmo.attrs["max_window"], elmo.attrs["max_batch_items"]
    assert (max_window, max_items) == (200, 4096)  # the configs' settings
    text = _long_text(1000)
    shapes, hook = _record_batches(frozen)
    try:
        alone = frozen(text)
        batch = list(frozen.pipe([text, "The film was dull.", _long_text(730)]))
    finally:
        hook.remove()
    assert len(alone) == 1000 and alone._.elmo.layers.shape == (3, 1000, 32)
    assert [tuple(s) for s in alone._.elmo.segments] == [(i, i + 200) for i in range(0, 1000, 200)]
    assert np.isfinite(alone._.elmo.layers).all()
    # a window and its <S> </S>; padded positions per forward pass within max_batch_items
    assert all(positions <= max_window + 2 and n * positions <= max_items for n, positions in shapes)
    assert sum(alone.cats.values()) == pytest.approx(1.0)
    assert batch[0].cats == pytest.approx(alone.cats, abs=1e-5)  # batch mates do not matter
    # a training step of the fine-tuned biLM on it: gradients flow back through every window
    before = _bilm_params(tuned)
    shapes, hook = _record_batches(tuned)
    try:
        gold = tuned.make_doc(text)
        gold.cats = {"pos": 1.0, "neg": 0.0}
        optimizer = tuned.resume_training()
        losses = tuned.update([Example(tuned.make_doc(text), gold)], sgd=optimizer)
        # nlp.update steps the elmo component before its listeners send their gradients (as with
        # spaCy's tok2vec): they are applied at the next step
        tuned.get_pipe("elmo").finish_update(optimizer)
    finally:
        hook.remove()
    assert losses["textcat"] > 0 and losses["elmo"] > 0
    assert all(positions <= max_window + 2 and n * positions <= max_items for n, positions in shapes)
    assert any(not torch.equal(value, before[name]) for name, value in _bilm_params(tuned).items())


def test_replaced_listeners_classify_as_before_saved_and_sourced(data, frozen, tmp_path):
    nlp = spacy.load(data / "frozen" / "model-last")  # a copy of `frozen`, which other tests share
    texts = ["We saw it on Sunday. The film was wonderful.", "The film was dull.", _long_text(260)]
    before = [doc.cats for doc in nlp.pipe(texts)]
    nlp.replace_listeners("elmo", "textcat", ["model.tok2vec"])
    assert [doc.cats for doc in nlp.pipe(texts)] == before
    nlp.to_disk(tmp_path / "replaced")
    blank = spacy.blank("en")
    blank.add_pipe("sentencizer")  # the elmo segments follow the sentences, as in the trained pipeline
    blank.add_pipe("textcat", source=spacy.load(tmp_path / "replaced"))
    assert [doc.cats for doc in blank.pipe(texts)] == before
