"""The layer dump: one dataset a sentence, a sentence longer than a window run in the component's
windows and written window by window."""
import h5py
import numpy as np

from spacy_elmo.bilm.batching import MAX_WINDOW, windows
from spacy_elmo.io.layer_dump import dump_layers


def test_a_sentence_longer_than_a_window_runs_in_windows_written_in_order_beside_short_ones(tmp_path, tiny_bilm):
    long = [f"w{i % 37}" for i in range(2 * MAX_WINDOW + 50)]
    sentences = [["The", "cat"], long, []]
    steps = []
    tiny_bilm.register_forward_pre_hook(lambda module, args: steps.append(args[0].shape[1]))
    out = tmp_path / "layers.hdf5"
    assert dump_layers(tiny_bilm, sentences, out, batch_size=2) == 3
    assert max(steps) == MAX_WINDOW + 2  # <S> and </S> around a full window, never the whole line
    expected = np.concatenate(tiny_bilm.embed([long[b:e] for b, e in windows(0, len(long))]), axis=1)
    with h5py.File(out, "r") as handle:
        assert [handle[k].shape for k in ("0", "1", "2")] == [(3, 2, 32), (3, len(long), 32), (3, 0, 32)]
        np.testing.assert_allclose(handle["1"][...], expected, atol=1e-5)
        np.testing.assert_allclose(handle["0"][...], tiny_bilm.embed([["The", "cat"]])[0], atol=1e-5)
