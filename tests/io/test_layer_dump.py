"""The layer dump: one dataset a sentence, a sentence longer than a window run in the component's
windows and written window by window."""
import h5py
import numpy as np
import pytest

from spacy_elmo.bilm.batching import MAX_WINDOW, windows
from spacy_elmo.io.layer_dump import DONE, dump_layers, partial_path


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


def _layers(path):
    with h5py.File(path, "r") as handle:
        return {key: handle[key][...] for key in handle}, dict(handle.attrs)


def test_the_file_appears_only_when_whole_and_an_interrupted_run_continues_where_it_stopped(tmp_path, tiny_bilm):
    sentences = [["The", "cat", "sat"], [], [f"w{i}" for i in range(7)], ["A", "bank"], [], ["Rivers"]] * 20
    whole = tmp_path / "whole.hdf5"
    dump_layers(tiny_bilm, sentences, whole, batch_size=2, max_window=4)
    out = tmp_path / "layers.hdf5"
    out.write_bytes(b"what the user had")
    calls = []

    def stop_midway(done, tokens):
        calls.append((done, tokens))
        if len(calls) == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        dump_layers(tiny_bilm, sentences, out, batch_size=2, max_window=4, progress=stop_midway)
    assert out.read_bytes() == b"what the user had"  # nothing replaced until the new file is whole
    partial = partial_path(out)
    with h5py.File(partial, "r") as handle:
        done = int(handle.attrs[DONE])
        assert 0 < done < len(sentences) and len(handle) >= done
    notes, told = [], []
    assert dump_layers(tiny_bilm, sentences, out, batch_size=2, max_window=4, note=notes.append,
                       progress=lambda d, t: told.append(d)) == len(sentences)
    assert told[0] == done and "continuing" in notes[0] and not partial.exists()
    got, attrs = _layers(out)
    expected, _ = _layers(whole)
    assert sorted(got, key=int) == [str(i) for i in range(len(sentences))] and attrs == {}
    for key, array in expected.items():
        assert got[key].shape == array.shape
        np.testing.assert_allclose(got[key], array, atol=1e-5)


def test_a_partial_file_of_other_input_is_started_over_with_a_note(tmp_path, tiny_bilm):
    out = tmp_path / "layers.hdf5"
    with pytest.raises(KeyboardInterrupt):
        dump_layers(tiny_bilm, [["a", "b"]] * 30, out, batch_size=1,
                    progress=lambda d, t: (_ for _ in ()).throw(KeyboardInterrupt) if d else None)
    notes = []
    dump_layers(tiny_bilm, [["c"]] * 5, out, note=notes.append)
    assert "another input" in notes[0]
    got, _ = _layers(out)
    assert sorted(got) == ["0", "1", "2", "3", "4"] and got["0"].shape == (3, 1, 32)
    partial_path(out).write_bytes(b"not hdf5")
    notes.clear()
    dump_layers(tiny_bilm, [["c"]] * 5, out, note=notes.append)
    assert "cannot be read" in notes[0] and _layers(out)[0].keys() == got.keys()
