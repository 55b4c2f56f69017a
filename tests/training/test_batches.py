import numpy as np

from spacy_elmo.bilm import sentence_char_ids
from spacy_elmo.training.batches import NO_TARGET, epoch_segments, sentence_batch, sentence_batches, window_batches
from spacy_elmo.training.corpus import Corpus
from spacy_elmo.training.vocab import Vocab

VOCAB = Vocab(["a", "b", "c"])


def test_sentence_batch_targets():
    batch = sentence_batch([["a", "b"], ["c"]], VOCAB, 50)
    a, b, c = 3, 4, 5
    assert batch.lengths.tolist() == [4, 3]
    assert batch.forward_targets.tolist() == [[a, b, VOCAB.eos, NO_TARGET], [c, VOCAB.eos, NO_TARGET, NO_TARGET]]
    assert batch.backward_targets.tolist() == [[NO_TARGET, VOCAB.bos, a, b], [NO_TARGET, VOCAB.bos, c, NO_TARGET]]
    assert batch.n_targets == 5
    assert np.array_equal(batch.char_ids[1, :3], sentence_char_ids(["c"], 50))
    assert not batch.char_ids[1, 3].any()


def test_sentence_batches_cover_every_sentence_once_and_respect_the_token_cap():
    sentences = [["a"] * n for n in range(1, 40)]
    batches = list(
        sentence_batches(iter(sentences), VOCAB, seed=0, epoch=0, batch_size=8, max_batch_tokens=60, buffer_size=16, max_chars=50)
    )
    lengths = sorted(int(n) - 2 for b in batches for n in b.lengths)
    assert lengths == list(range(1, 40))
    assert all(len(b.lengths) * b.lengths.max() <= 60 or len(b.lengths) == 1 for b in batches)


def test_epochs_are_reproducible_and_differ(tmp_path):
    path = tmp_path / "c.txt"
    path.write_text("".join(f"a b {'c ' * (i % 7)}\n" for i in range(200)), encoding="utf-8")
    other = tmp_path / "d.txt"
    other.write_text("b b\n" * 50, encoding="utf-8")
    corpus = Corpus([path, other])

    def run(epoch):
        segments = epoch_segments(corpus, seed=3, epoch=epoch, max_tokens=20)
        return [b.char_ids.tobytes() for b in sentence_batches(segments, VOCAB, seed=3, epoch=epoch, batch_size=8, max_batch_tokens=None, buffer_size=64, max_chars=50)]

    assert run(0) == run(0)
    assert run(0) != run(1)


def test_windows_carry_the_stream():
    sentences = [["a", "b"], ["c"], ["a", "a", "b"], ["c", "c"]] * 3
    batches = list(window_batches(iter(sentences), VOCAB, seed=0, epoch=0, batch_size=2, unroll_steps=4, buffer_size=100, max_chars=50))
    assert len(batches) >= 2 and all(b.carry_state and b.char_ids.shape[:2] == (2, 4) for b in batches)
    first, second = batches[0], batches[1]
    # within a window, position i + 2 looks back at the token position i predicts
    assert np.array_equal(first.forward_targets[:, :-2], first.backward_targets[:, 2:])
    assert (first.backward_targets[:, 0] == NO_TARGET).all()
    for row in range(2):
        # the next window starts with the token the last position predicted, and looks back across the cut
        next_token = VOCAB.tokens[first.forward_targets[row, -1]]
        assert np.array_equal(second.char_ids[row, 0], sentence_char_ids([next_token], 50, boundaries=False)[0])
        assert second.backward_targets[row, 0] == first.forward_targets[row, -2]
    total = sum(len(s) + 2 for s in sentences)
    assert len(batches) * 2 * 4 <= total
