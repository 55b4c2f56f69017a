"""biLMs and softmax heads read from TensorFlow files, against bilm-tf's own outputs
(tests/data/bilm_tf/README.md says how the references were made)."""
import json
import shutil
import tarfile
import warnings
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch

from spacy_elmo.io import ModelFileError
from spacy_elmo.io.bilm_tf import hdf5_name, load_bilm_tf, read_tf_head, read_tf_softmax
from spacy_elmo.io.tf_layouts import is_tf_model

DATA = Path(__file__).parent.parent / "data" / "bilm_tf"
REFERENCE = json.loads((DATA / "reference.json").read_text())
ARRAYS = np.load(DATA / "reference.npz", allow_pickle=False)
SENTENCES = [s.split() for s in REFERENCE["sentences"]]
LAYOUTS = ["checkpoint_folder", "nlpl_full.zip", "tfhub_module", "deeppavlov_lm.tar.gz", "deeppavlov_hub.tar.gz"]
WITH_SOFTMAX = ["checkpoint_folder", "nlpl_full.zip", "deeppavlov_lm.tar.gz"]
WITHOUT_OPTIONS = {"tfhub_module", "deeppavlov_hub.tar.gz"}


def _load(layout):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore" if layout in WITHOUT_OPTIONS else "error")
        return load_bilm_tf(DATA / layout)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_each_layout_gives_bilm_tfs_layers_and_char_ids(layout):
    bilm = _load(layout)
    ids, lengths = bilm.batch_ids(SENTENCES)
    assert np.array_equal(ids, ARRAYS["char_ids"])
    for i, layers in enumerate(bilm.embed(SENTENCES)):
        n = len(SENTENCES[i])
        assert layers.shape == (3, n, 12)
        np.testing.assert_allclose(layers, ARRAYS["lm_embeddings"][i, :, :n], atol=1e-5, rtol=0)


@pytest.mark.parametrize("layout", WITH_SOFTMAX)
def test_the_softmax_is_read_exactly_with_its_vocabulary(layout):
    softmax, vocab = read_tf_softmax(DATA / layout)
    assert torch.equal(softmax.weight.detach(), torch.from_numpy(ARRAYS["softmax_W"]))
    assert torch.equal(softmax.bias.detach(), torch.from_numpy(ARRAYS["softmax_b"]))
    assert vocab == (DATA / "vocab.txt").read_text(encoding="utf-8")
    with h5py.File(DATA / "tiny_softmax_weights.hdf5", "r") as published:
        assert np.array_equal(published["softmax/W"][...], ARRAYS["softmax_W"])
        assert np.array_equal(published["softmax/b"][...], ARRAYS["softmax_b"])


def test_the_head_names_its_rows_with_the_vocabulary():
    head = read_tf_head(DATA / "deeppavlov_lm.tar.gz")
    assert head.words == tuple((DATA / "vocab.txt").read_text().split())
    assert head.check_fits(_load("checkpoint_folder")) is head


@pytest.mark.parametrize("layout", ["tfhub_module", "deeppavlov_hub.tar.gz"])
def test_a_tfhub_module_has_no_softmax_and_its_options_come_from_the_shapes(layout):
    with pytest.raises(ModelFileError, match="no softmax"):
        read_tf_softmax(DATA / layout)
    assert read_tf_head(DATA / layout) is None
    with pytest.warns(UserWarning, match="no options.json.*published values"):
        bilm = load_bilm_tf(DATA / layout)
    stated = json.loads((DATA / "options.json").read_text())
    assert bilm.config.to_options() == {
        "lstm": {k: stated["lstm"][k] for k in ("use_skip_connections", "projection_dim", "dim", "n_layers", "cell_clip", "proj_clip")},
        "char_cnn": {k: stated["char_cnn"][k] for k in bilm.config.to_options()["char_cnn"]},
    }


def test_training_options_say_261_characters_and_load_as_262():
    # bilm-tf's training code requires n_characters 261, its inference code 262
    stated = json.loads((DATA / "checkpoint_folder" / "options.json").read_text())
    assert stated["char_cnn"]["n_characters"] == 261
    assert _load("checkpoint_folder").config.n_characters == 262


def test_options_that_disagree_with_the_shapes_are_overruled_with_a_warning(tmp_path):
    folder = tmp_path / "ckpt"
    shutil.copytree(DATA / "checkpoint_folder", folder)
    options = json.loads((folder / "options.json").read_text())
    options["lstm"]["dim"] = 4096
    options["char_cnn"]["filters"] = [[1, 32]]
    options["lstm"]["cell_clip"] = 5
    (folder / "options.json").write_text(json.dumps(options))
    with pytest.warns(UserWarning, match=r"filters .*dim 4096 \(the tensors say 12\)"):
        bilm = load_bilm_tf(folder)
    assert (bilm.config.dim, bilm.config.filters) == (12, ((1, 4), (2, 6), (3, 6)))
    assert bilm.config.cell_clip == 5.0  # what shapes cannot show comes from the options


def _log_probs(hidden, softmax):
    return torch.log_softmax(hidden @ softmax.weight.T + softmax.bias, dim=-1).detach().numpy()


def test_substitutes_from_the_top_layer_times_the_softmax_match_bilm_tf():
    bilm = _load("checkpoint_folder")
    softmax, _ = read_tf_softmax(DATA / "checkpoint_folder")
    width = bilm.config.projection_dim
    for i, sentence in enumerate(SENTENCES):
        ids, _ = bilm.batch_ids([sentence])
        with torch.no_grad():
            top = bilm(torch.from_numpy(ids)).layers[-1][0]  # <S> w1..wn </S>
        n = len(sentence)
        forward = _log_probs(top[:n, :width], softmax)  # the state before each word
        backward = _log_probs(top[2 : n + 2, width:], softmax)  # the state after it
        combined = 0.5 * (forward + backward)
        for name, ours in (("forward", forward), ("backward", backward), ("combined", combined)):
            theirs = ARRAYS[f"{name}_{i}"]
            np.testing.assert_allclose(ours, theirs, atol=1e-5, rtol=0)
            order = np.sort(theirs, axis=1)[:, ::-1]
            clear = (order[:, :5] - order[:, 1:6]).min(axis=1) > 1e-4  # rows without near ties in the top 5
            top_ids = np.argsort(-ours, axis=1, kind="stable")[:, :5]
            assert np.array_equal(top_ids[clear], ARRAYS[f"top_{name}_{i}"][clear])
            assert clear.any()


def _stream_nll(bilm, softmax, *, carried):
    """Per-token NLL the way bilm-tf's ``test`` scores a stream: forward over ``<S> w1..wn``
    predicting ``w1..wn </S>``, backward over ``</S> wn..w1`` predicting ``wn..w1 <S>``."""
    vocab = (DATA / "vocab.txt").read_text().split()
    index = {w: k for k, w in enumerate(vocab)}
    width = bilm.config.projection_dim
    forward_nll, backward_nll = [], []
    state_f = state_b = None
    for sentence in SENTENCES:
        ids, _ = bilm.batch_ids([sentence])
        targets = [index.get(w, index["<UNK>"]) for w in ["<S>", *sentence, "</S>"]]
        zero = bilm.zero_state(1)
        with torch.no_grad():
            out_f = bilm(torch.from_numpy(ids[:, :-1]), initial_state=(state_f or zero[0], zero[1]))
            out_b = bilm(torch.from_numpy(ids[:, 1:]), initial_state=(zero[0], state_b or zero[1]))
        forward = _log_probs(out_f.layers[-1][0, :, :width], softmax)
        backward = _log_probs(out_b.layers[-1][0, :, width:], softmax)[::-1]
        forward_nll += [-forward[t, targets[t + 1]] for t in range(len(targets) - 1)]
        reverse = targets[::-1]
        backward_nll += [-backward[t, reverse[t + 1]] for t in range(len(targets) - 1)]
        if carried:
            state_f, state_b = out_f.state[0], out_b.state[1]
    return np.array(forward_nll), np.array(backward_nll)


@pytest.mark.parametrize("mode", ["fresh", "carried"])
def test_per_token_nll_and_perplexity_match_bilm_tf(mode):
    bilm = _load("deeppavlov_lm.tar.gz")
    softmax, _ = read_tf_softmax(DATA / "deeppavlov_lm.tar.gz")
    forward, backward = _stream_nll(bilm, softmax, carried=mode == "carried")
    theirs = REFERENCE["token_nll"][mode]
    np.testing.assert_allclose(forward, theirs["forward"], atol=1e-5, rtol=0)
    np.testing.assert_allclose(backward, theirs["backward"], atol=1e-5, rtol=0)
    perplexity = float(np.exp(np.mean(0.5 * (forward + backward))))
    if mode == "carried":
        assert perplexity == pytest.approx(REFERENCE["test_perplexity_carried"], rel=1e-4)
    else:
        assert abs(perplexity - REFERENCE["test_perplexity_carried"]) > 0.1  # the state matters here


@pytest.mark.parametrize(
    "name, expected",
    [
        ("RNN_0/rnn/multi_rnn_cell/cell_1/lstm_cell/kernel", "RNN_0/RNN/MultiRNNCell/Cell1/LSTMCell/W_0"),
        ("RNN_1/RNN/MultiRNNCell/Cell0/rnn/lstm_cell/projection/kernel", "RNN_1/RNN/MultiRNNCell/Cell0/LSTMCell/W_P_0"),
        ("RNN_0/rnn/lstm_cell/bias", "RNN_0/RNN/MultiRNNCell/Cell0/LSTMCell/B"),
        ("RNN_0/rnn/multi_rnn_cell/cell_1/residual_wrapper/lstm_cell/weights", "RNN_0/RNN/MultiRNNCell/Cell1/LSTMCell/W_0"),
        ("RNN_0/RNN/MultiRNNCell/Cell0/LSTMCell/W_0", "RNN_0/RNN/MultiRNNCell/Cell0/LSTMCell/W_0"),
        ("CNN_high_0/W_carry", "CNN_high_0/W_carry"),
        ("RNN_0/rnn/multi_rnn_cell/cell_0/lstm_cell/kernel/Adagrad", "RNN_0/RNN/MultiRNNCell/Cell0/lstm_cell/kernel/Adagrad"),
    ],
)
def test_every_graphs_lstm_names_map_onto_the_published_hdf5_names(name, expected):
    assert hdf5_name(name) == expected


def test_missing_and_damaged_files_are_refused_with_their_names(tmp_path):
    folder = tmp_path / "ckpt"
    shutil.copytree(DATA / "checkpoint_folder", folder)
    (folder / "checkpoint").write_text('model_checkpoint_path: "/elsewhere/model.ckpt-99"\n')
    with pytest.raises(ModelFileError, match="names checkpoint model.ckpt-99"):
        load_bilm_tf(folder)
    (folder / "checkpoint").unlink()
    assert _load_quietly(folder).config.dim == 12  # one checkpoint: no state file needed
    shutil.copy(folder / "model.ckpt-24.index", folder / "model.ckpt-12.index")
    with pytest.raises(ModelFileError, match="several checkpoints"):
        load_bilm_tf(folder)
    (folder / "model.ckpt-12.index").unlink()
    (folder / "model.ckpt-24.data-00000-of-00001").unlink()
    with pytest.raises(ModelFileError, match="data-00000-of-00001"):
        load_bilm_tf(folder)
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "options.json").write_text("{}")
    assert not is_tf_model(empty)
    with pytest.raises(ModelFileError, match="no TensorFlow checkpoint"):
        load_bilm_tf(empty)
    truncated = tmp_path / "cut.tar.gz"
    truncated.write_bytes((DATA / "deeppavlov_lm.tar.gz").read_bytes()[:5000])
    with pytest.raises(ModelFileError):
        load_bilm_tf(truncated)


def test_a_checkpoint_that_is_no_bilm_is_refused(tmp_path):
    archive = tmp_path / "other.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(DATA / "tfhub_module" / "variables", "variables")
    assert is_tf_model(archive)
    bilm = _load_quietly(archive)  # the module's variables alone: still the biLM
    assert bilm.config.n_layers == 2
    bad = tmp_path / "bad"
    shutil.copytree(DATA / "checkpoint_folder", bad)
    (bad / "options.json").write_text("[1, 2]")
    with pytest.raises(ModelFileError, match="options JSON must be an object"):
        load_bilm_tf(bad)


def _load_quietly(path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return load_bilm_tf(path)


def test_the_allennlp_style_softmax_file_reads_as_the_checkpoints_head():
    from spacy_elmo.io.lm_head import load_published_head

    published = load_published_head(DATA / "tiny_softmax_weights.hdf5", DATA / "vocab.txt")
    from_checkpoint = read_tf_head(DATA / "checkpoint_folder")
    assert published.words == from_checkpoint.words
    assert torch.equal(published.softmax.weight, from_checkpoint.softmax.weight)
    assert torch.equal(published.softmax.bias, from_checkpoint.softmax.bias)
