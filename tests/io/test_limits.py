"""What a file declares is checked before a model is built: the parameter count a configuration
implies, the cap on a model's size, and a hostile options file refused in seconds and little memory."""
import json
import re
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import h5py
import pytest

from spacy_elmo.io import ModelFileError, load_bilm, read_options
from spacy_elmo.io.allennlp import tensor_shapes
from spacy_elmo.io.efml import load_efml
from spacy_elmo.io.limits import MAX_MODEL_BYTES_ENV, max_model_bytes, parameter_count, parse_bytes

from ..conftest import TINY

EFML_MODEL = Path(__file__).parent.parent / "data" / "elmoformanylangs" / "model"
ROOT = Path(__file__).parent.parent.parent


def _numel(bilm) -> int:
    return sum(value.numel() for value in bilm.state_dict().values())


def test_the_parameter_count_of_a_config_is_the_models_own():
    bilm = load_bilm(options=TINY / "options.json", weights=TINY / "weights.hdf5", optimize=False)
    assert parameter_count(bilm.config) == _numel(bilm)
    efml = load_efml(EFML_MODEL)
    vocab = efml.char_vocab
    assert vocab.words is not None  # the fixture has a word embedding, which the count must include
    assert parameter_count(efml.config, words=vocab.n_words, word_dim=vocab.word_dim) == _numel(efml)


def test_the_shapes_options_imply_are_the_published_files_shapes():
    with h5py.File(TINY / "weights.hdf5", "r") as handle:
        stored = {}
        handle.visititems(lambda name, node: stored.update({name: node.shape}) if isinstance(node, h5py.Dataset) else None)
    assert tensor_shapes(read_options(TINY / "options.json")) == stored


def _pair(tmp_path: Path, **lstm) -> Path:
    options = json.loads((TINY / "options.json").read_text())
    options["lstm"].update(lstm)
    path = tmp_path / "options.json"
    path.write_text(json.dumps(options))
    return path


def test_a_model_over_the_cap_is_refused_naming_the_cap_and_how_to_raise_it(tmp_path, monkeypatch):
    options, weights = TINY / "options.json", TINY / "weights.hdf5"
    monkeypatch.setenv(MAX_MODEL_BYTES_ENV, "100KB")
    assert max_model_bytes() == 100_000
    with pytest.raises(ModelFileError, match=rf"options.json: .*more than the cap of 97.7 KiB.*{MAX_MODEL_BYTES_ENV}="):
        load_bilm(options=options, weights=weights)
    assert load_bilm(options=options, weights=weights, max_model_bytes=10**6).config.dim == 64
    monkeypatch.delenv(MAX_MODEL_BYTES_ENV)
    with pytest.raises(ModelFileError, match=r"max_model_bytes=\d+"):
        load_bilm(options=options, weights=weights, max_model_bytes=1000)
    assert max_model_bytes() == 2 * 2**30  # the keyword holds for its own call only
    monkeypatch.setenv(MAX_MODEL_BYTES_ENV, "lots")
    with pytest.raises(ValueError, match=f"{MAX_MODEL_BYTES_ENV}='lots' is not a size"):
        max_model_bytes()
    assert parse_bytes("8 GiB", "x") == 8 * 2**30 and parse_bytes("4000000000", "x") == 4 * 10**9


def test_options_that_imply_other_tensors_than_the_weights_hold_are_refused_by_name(tmp_path):
    with pytest.raises(ModelFileError, match=r"'RNN_0/RNN/MultiRNNCell/Cell0/LSTMCell/W_0' has shape \(32, 256\) but"):
        load_bilm(options=_pair(tmp_path, dim=65), weights=TINY / "weights.hdf5")
    with pytest.raises(ModelFileError, match=r"holds 6 datasets the options file .* does not imply \(RNN_0/RNN/MultiRNNCell/Cell1"):
        load_bilm(options=_pair(tmp_path, n_layers=1), weights=TINY / "weights.hdf5")


def test_a_dataset_whose_bytes_are_not_in_the_file_is_refused_before_reading(tmp_path):
    weights = tmp_path / "weights.hdf5"
    with h5py.File(TINY / "weights.hdf5", "r") as source, h5py.File(weights, "w") as target:
        for name in tensor_shapes(read_options(TINY / "options.json")):
            if name == "char_embed":  # declared, never written: no storage, would read as zeros
                target.create_dataset(name, shape=source[name].shape, dtype="f4")
            else:
                target.create_dataset(name, data=source[name][...])
    with pytest.raises(ModelFileError, match=r"'char_embed' needs 4176 bytes but has no bytes stored"):
        load_bilm(options=TINY / "options.json", weights=weights)
    truncated = tmp_path / "truncated.hdf5"
    data = (TINY / "weights.hdf5").read_bytes()
    truncated.write_bytes(data[: len(data) - 4000])
    with pytest.raises(ModelFileError, match="truncated"):
        load_bilm(options=TINY / "options.json", weights=truncated)


HOSTILE = textwrap.dedent("""
    import resource, sys, time
    from spacy_elmo.io import ModelFileError, load_bilm
    start = time.perf_counter()
    try:
        load_bilm(options=sys.argv[1], weights=sys.argv[2])
    except ModelFileError as error:
        print("refused", round(time.perf_counter() - start, 2), error, sep="\\t")
    # the peak of this process's own memory: VmHWM starts afresh at exec, where ru_maxrss keeps the
    # parent's peak (Linux carries it over exec, so a large test runner's would show here)
    with open("/proc/self/status") as status:
        print(next(line.split()[1] for line in status if line.startswith("VmHWM:")))
""")


def test_an_options_file_with_a_huge_lstm_is_refused_in_seconds_and_little_memory(tmp_path):
    options = _pair(tmp_path, dim=4_000_000)
    limit = "import resource; resource.setrlimit(resource.RLIMIT_AS, (3 * 2**29, 3 * 2**29))\n"
    run = subprocess.run(
        [sys.executable, "-c", limit + HOSTILE, str(options), str(TINY / "weights.hdf5")],
        capture_output=True, text=True, timeout=120, cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    assert run.returncode == 0, run.stderr[-2000:]
    refused, peak_kib = run.stdout.strip().split("\n")
    word, seconds, message = refused.split("\t")
    assert word == "refused" and float(seconds) < 5.0
    assert "more than the cap of 2.0 GiB" in message and message.startswith(str(options))
    assert int(peak_kib) < 2**20  # under 1 GiB resident at the peak


def test_our_directory_whose_config_declares_a_huge_lstm_is_refused_before_building(tmp_path):
    from spacy_elmo.io import save_bilm

    directory = save_bilm(load_bilm(options=TINY / "options.json", weights=TINY / "weights.hdf5", optimize=False), tmp_path / "m")
    config = json.loads((directory / "config.json").read_text())
    config["options"]["lstm"]["dim"] = 4_000_000  # the weights and their checksum are unchanged
    (directory / "config.json").write_text(json.dumps(config))
    with pytest.raises(ModelFileError, match=r"model.safetensors: the weights hold \d+ parameters, but the configuration "
                                             r"declares a biLM of \d{10}: they do not describe one model"):
        load_bilm(directory)


def test_an_efml_architecture_that_declares_a_huge_lstm_is_refused_before_building(tmp_path):
    directory = tmp_path / "efml"
    shutil.copytree(EFML_MODEL, directory)
    path = directory / "cnn_16_8_16_32_sample.json"
    architecture = json.loads(path.read_text())
    architecture["encoder"]["dim"] = 4_000_000
    path.write_text(json.dumps(architecture))
    with pytest.raises(ModelFileError, match=r"encoder.pkl: forward_layer_0 input has 128 rows, expected 4 \* dim = 16000000"):
        load_bilm(directory)
    architecture["encoder"]["dim"], architecture["token_embedder"]["char_dim"] = 32, 400_000
    path.write_text(json.dumps(architecture))
    with pytest.raises(ModelFileError, match=r"cnn_16_8_16_32_sample.json: the weights hold \d+ parameters, but the configuration declares"):
        load_bilm(directory)


@pytest.mark.parametrize("section, key", [("lstm", "n_layers"), ("char_cnn", "n_highway")])
def test_options_declaring_a_million_layers_are_refused_before_any_list_of_tensors_is_made(tmp_path, section, key):
    options = json.loads((TINY / "options.json").read_text())
    options[section][key] = 1_000_000
    path = tmp_path / "options.json"
    path.write_text(json.dumps(options))
    with pytest.raises(ModelFileError, match=r"options.json: declares \d+ tensors .*more than 10000: not a biLM's"):
        load_bilm(options=path, weights=TINY / "weights.hdf5")


def test_a_weights_file_larger_than_a_model_may_be_is_refused_before_it_is_read(tmp_path, monkeypatch):
    from spacy_elmo.io import save_bilm

    directory = save_bilm(load_bilm(options=TINY / "options.json", weights=TINY / "weights.hdf5", optimize=False), tmp_path / "m")
    monkeypatch.setenv(MAX_MODEL_BYTES_ENV, "1000")  # a model file may then hold 2000 bytes and headers
    os.truncate(directory / "model.safetensors", 8 << 20)  # sparse: what a hostile file could declare
    with pytest.raises(ModelFileError, match=rf"model.safetensors: 8388608 bytes, more than a model's weights may hold .*{MAX_MODEL_BYTES_ENV}"):
        load_bilm(directory)


@pytest.mark.parametrize("section, key, value, problem", [
    ("char_cnn", "max_characters_per_token", 10**9, "declares 1000000000 characters per token, more than 1000"),
    ("lstm", "dim", 64.5, "lstm.dim is 64.5, not a whole number"),
    ("lstm", "n_layers", True, "lstm.n_layers is True, not a whole number"),
])
def test_options_that_no_shape_shows_are_held_to_whole_and_bounded_numbers(tmp_path, section, key, value, problem):
    options = json.loads((TINY / "options.json").read_text())
    options[section][key] = value
    path = tmp_path / "options.json"
    path.write_text(json.dumps(options))
    with pytest.raises(ModelFileError, match=rf"options.json: {re.escape(problem)}"):
        load_bilm(options=path, weights=TINY / "weights.hdf5")


def test_a_library_reason_that_spans_lines_comes_as_one_line():
    error = ModelFileError("model.bin", "refused (first\n\n  second\nthird)")
    assert str(error) == "model.bin: refused (first second third)" and error.problem == "refused (first second third)"
