import json
import shutil
import subprocess
import sys

import h5py
import pytest
import numpy as np
import spacy
import torch
from spacy.tokens import Doc
from typer.testing import CliRunner

from spacy_elmo.cli import app
from spacy_elmo.io import load_allennlp, save_bilm

runner = CliRunner()


def _layers(nlp, sentences):
    return [doc._.elmo.layers for doc in nlp.pipe(Doc(nlp.vocab, words=w) for w in sentences)]


def test_convert_end_to_end_without_the_original_files(tiny_paths, tiny_sentences, tiny_expected, tmp_path):
    options = shutil.copy(tiny_paths[0], tmp_path / "options.json")
    weights = shutil.copy(tiny_paths[1], tmp_path / "weights.hdf5")
    out = tmp_path / "pipeline"
    args = ["convert", "--options", str(options), "--weights", str(weights), "--output", str(out), "--lang", "en"]
    result = subprocess.run(
        [sys.executable, "-m", "spacy_elmo", *args],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    (tmp_path / "options.json").unlink()
    (tmp_path / "weights.hdf5").unlink()
    nlp = spacy.load(out)
    assert nlp.lang == "en" and nlp.pipe_names == ["elmo"]
    # the saved component describes the imported shape (its model block names no shape: spacy-elmo.BiLM.v3)
    assert nlp.config["components"]["elmo"]["model"]["@architectures"] == "spacy-elmo.BiLM.v3"
    assert nlp.get_pipe("elmo").cfg["bilm_options"]["lstm"]["projection_dim"] == 16
    for i, layers in enumerate(_layers(nlp, tiny_sentences)):
        np.testing.assert_allclose(layers, tiny_expected[f"layers_{i}"], atol=1e-5)


def test_convert_from_our_directory_with_another_language(tiny_paths, tmp_path):
    bilm = load_allennlp(*tiny_paths)
    save_bilm(bilm, tmp_path / "model")
    args = ["convert", "--model", str(tmp_path / "model"), "--output", str(tmp_path / "de"), "--lang", "de"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    nlp = spacy.load(tmp_path / "de")
    assert nlp.lang == "de"
    doc = nlp("Die Bank am Fluss .")
    # the component runs the biLM optimized for inference: equal to rounding (DESIGN: 1e-5)
    np.testing.assert_allclose(doc._.elmo.layers, bilm.embed([[t.text for t in doc]])[0], atol=1e-5)


def test_to_allennlp_round_trip_from_pipeline_and_model_dir(tiny_paths, tiny_sentences, tmp_path):
    options, weights = tiny_paths
    args = ["convert", "--options", str(options), "--weights", str(weights), "--output", str(tmp_path / "p"), "--lang", "en"]
    assert runner.invoke(app, args).exit_code == 0
    original = load_allennlp(*tiny_paths).embed(tiny_sentences)
    for source in (tmp_path / "p", tmp_path / "p" / "elmo" / "model"):
        out = tmp_path / f"published_{source.name}"
        result = runner.invoke(app, ["convert", "--to-allennlp", "--model", str(source), "--output", str(out)])
        assert result.exit_code == 0, result.output
        assert json.loads((out / "options.json").read_text()) == json.loads(options.read_text())
        with h5py.File(out / "weights.hdf5", "r") as exported, h5py.File(weights, "r") as published:
            names = []
            published.visit(lambda name: names.append(name) if isinstance(published[name], h5py.Dataset) else None)
            for name in names:
                assert exported[name].shape == published[name].shape and exported[name].dtype == np.float32, name
        # bitwise: float32 weights exported and read back unchanged, the same batches
        for a, b in zip(load_allennlp(out / "options.json", out / "weights.hdf5").embed(tiny_sentences), original):
            np.testing.assert_array_equal(a, b)


def test_convert_errors_name_the_problem(tiny_paths, tmp_path):
    options, _ = tiny_paths
    missing = tmp_path / "missing.hdf5"
    args = ["convert", "--options", str(options), "--weights", str(missing), "--output", str(tmp_path / "x")]
    result = runner.invoke(app, args)
    assert result.exit_code == 1 and str(missing) in result.output and "not found" in result.output
    assert not (tmp_path / "x").exists()
    result = runner.invoke(app, ["convert", "--options", str(options), "--output", str(tmp_path / "x")])
    assert result.exit_code == 2 and "--weights" in result.output
    result = runner.invoke(app, ["convert", "--to-allennlp", "--output", str(tmp_path / "x")])
    assert result.exit_code == 2 and "--model" in result.output
    spacy.blank("en").to_disk(tmp_path / "no_elmo")
    args = ["convert", "--to-allennlp", "--model", str(tmp_path / "no_elmo"), "--output", str(tmp_path / "y")]
    result = runner.invoke(app, args)
    assert result.exit_code == 1 and "no elmo component" in result.output


def test_convert_to_efml_writes_a_directory_that_reads_back_as_the_model(tmp_path):
    from pathlib import Path

    from spacy_elmo.io import load_efml

    model = Path(__file__).resolve().parents[1] / "data" / "elmoformanylangs" / "model"
    result = CliRunner().invoke(app, ["convert", "--to-efml", "--model", str(model), "--output", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    original, again = load_efml(model), load_efml(tmp_path / "out")
    assert all(torch.equal(v, again.state_dict()[k]) for k, v in original.state_dict().items())
    refused = CliRunner().invoke(app, ["convert", "--to-efml", "--model", str(model), "--options", "o.json",
                                       "--output", str(tmp_path / "x")])
    assert refused.exit_code != 0


def test_convert_reads_an_elmoformanylangs_zip_as_published(tmp_path):
    """A published EFML zip (no architecture JSON, config_path outside it): the language its
    meta.json records; a subprocess, as a user runs it, prints the one architecture line."""
    from pathlib import Path

    published = Path(__file__).resolve().parents[1] / "data" / "elmoformanylangs" / "published"
    data = published.parent
    out = tmp_path / "pipeline"
    result = subprocess.run(
        [sys.executable, "-m", "spacy_elmo", "convert", "--model", str(published / "absolute-config-path.zip"),
         "--output", str(out)], capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stderr.splitlines() if "architecture:" in line]
    assert len(lines) == 1 and "'/Users/yijialiu/" in lines[0] and "was not read" in lines[0]
    nlp = spacy.load(out)
    assert nlp.lang == "de"  # from the zip's meta.json
    sentences = json.loads((data / "sentences.json").read_text(encoding="utf-8"))
    with np.load(published / "absolute-config-path.npz") as golden:
        for i, layers in enumerate(_layers(nlp, sentences[:4])):
            assert layers.shape == golden[f"layers_{i}"].shape
            assert layers.size == 0 or np.abs(layers - golden[f"layers_{i}"]).max() <= 1e-5


def test_a_zip_whose_language_is_unknown_needs_lang(tmp_path):
    """No meta.json: the model may be for any language, so no pipeline is written without --lang
    (never an English one by default)."""
    from pathlib import Path

    zipped = Path(__file__).resolve().parents[1] / "data" / "elmoformanylangs" / "published" / "relative-config-path.zip"
    args = ["convert", "--model", str(zipped), "--output", str(tmp_path / "p")]
    result = runner.invoke(app, args)
    assert result.exit_code == 1 and "--lang" in result.output and "records no language" in result.output
    assert not (tmp_path / "p").exists()
    result = runner.invoke(app, [*args, "--lang", "ru"])
    assert result.exit_code == 0, result.output
    assert spacy.load(tmp_path / "p").lang == "ru"
    # a TensorFlow checkpoint folder records no language either
    checkpoint = zipped.parents[2] / "bilm_tf" / "checkpoint_folder"
    result = runner.invoke(app, ["convert", "--model", str(checkpoint), "--output", str(tmp_path / "tf")])
    assert result.exit_code == 1 and "a TensorFlow checkpoint or SavedModel records no language" in result.output
    assert not (tmp_path / "tf").exists()


def test_a_pair_or_a_model_directory_without_lang_is_refused_not_taken_for_english(tiny_paths, tmp_path):
    options, weights = tiny_paths
    save_bilm(load_allennlp(*tiny_paths), tmp_path / "model")
    for args in (["--options", str(options), "--weights", str(weights)], ["--model", str(tmp_path / "model")]):
        result = runner.invoke(app, ["convert", *args, "--output", str(tmp_path / "p")], terminal_width=400)
        message = " ".join(result.output.replace("\u2502", " ").split())
        assert result.exit_code != 0 and "records no language; give it with --lang" in message
        assert not (tmp_path / "p").exists()


def test_the_shipped_biLM_converts_to_an_english_pipeline_without_lang(tmp_path):
    from spacy_elmo.io.loading import shipped_model_dir

    result = runner.invoke(app, ["convert", "--model", str(shipped_model_dir()), "--output", str(tmp_path / "p")])
    assert result.exit_code == 0, result.output
    assert spacy.load(tmp_path / "p").lang == "en"


def test_a_trained_model_converts_without_lang_into_a_new_nested_folder_and_its_head_goes_beside_the_export(tmp_path):
    """A pretrain or finetune output records its language; convert makes the missing parent folders;
    --to-allennlp writes the softmax and vocabulary (which AllenNLP's format lacks) beside the pair."""
    import io

    from spacy_elmo.training.evaluation import evaluate_corpus
    from spacy_elmo.training.finetune import finetune
    from spacy_elmo.training.pretrain import pretrain

    from ..training.conftest import tiny_config, write_corpus

    train, dev = write_corpus(tmp_path / "train.txt", 200, seed=1), write_corpus(tmp_path / "dev.txt", 20, seed=2)
    pretrain(tiny_config(train, dev, training__max_steps=4, corpus__lang="en"), tmp_path / "pre", stream=io.StringIO())
    finetune(tiny_config(dev, dev, training__max_steps=2), tmp_path / "ft", model=tmp_path / "pre" / "model-best",
             stream=io.StringIO())
    nested = tmp_path / "export" / "deeper" / "ft-pipeline"
    result = runner.invoke(app, ["convert", "--model", str(tmp_path / "ft" / "model-best"), "--output", str(nested)])
    assert result.exit_code == 0, result.output
    assert spacy.load(nested).lang == "en"

    published = tmp_path / "published" / "ft"
    result = runner.invoke(app, ["convert", "--to-allennlp", "--model", str(tmp_path / "ft" / "model-best"), "--output", str(published)])
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())
    assert "AllenNLP's format holds the biLM only, no softmax or vocabulary" in said and "softmax.hdf5 + vocab.txt" in said
    assert (published / "softmax.hdf5").is_file() and (published / "vocab.txt").is_file()
    ours = evaluate_corpus(str(dev), model=str(tmp_path / "ft" / "model-best"))
    exported = evaluate_corpus(str(dev), model=str(published))
    assert exported.record["ppl"] == pytest.approx(ours.record["ppl"], rel=1e-5)

    # a model without a softmax says so
    save_bilm(load_allennlp(*_tiny_pair()), tmp_path / "bare")
    result = runner.invoke(app, ["convert", "--to-allennlp", "--model", str(tmp_path / "bare"), "--output", str(tmp_path / "bare-out")])
    assert result.exit_code == 0 and "this model has none to write" in " ".join(result.output.split())


def _tiny_pair():
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "data" / "allennlp" / "tiny"
    return root / "options.json", root / "weights.hdf5"
