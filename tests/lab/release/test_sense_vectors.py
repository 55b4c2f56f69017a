import json
from pathlib import Path

import numpy as np
import pytest

from lab.release.sense_vectors import SENSE_EXAMPLE, main
from spacy_elmo import __version__
from spacy_elmo.io import load_native, save_bilm
from spacy_elmo.io.loading import shipped_model_dir

ROOT = Path(__file__).resolve().parents[3]
# the record of the release this checkout ships
RECORD = ROOT / "results" / "en_small" / __version__ / "sense-vectors.json"
PAIRS = [
    ("bank", "I deposited cash at the bank", "She robbed the bank", "T"),
    ("bank", "We sat on the river bank", "The bank raised its rates", "F"),
    ("play", "The kids play soccer", "We play chess", "T"),
    ("play", "We saw a play", "The kids play outside", "F"),
    ("run", "I run every day", "They run fast", "T"),
    ("run", "He will run the company", "Dogs run in the park", "F"),
]


def _wic(folder: Path, name: str) -> None:
    folder.mkdir(parents=True)
    data, gold = [], []
    for word, first, second, label in PAIRS:
        i, j = first.split().index(word), second.split().index(word)
        data.append(f"{word}\tN\t{i}-{j}\t{first}\t{second}")
        gold.append(label)
    (folder / f"{name}.data.txt").write_text("\n".join(data) + "\n", encoding="utf-8")
    (folder / f"{name}.gold.txt").write_text("\n".join(gold) + "\n", encoding="utf-8")


def _model_wic_corpus(bilm, tmp_path: Path) -> Path:
    """A saved model, a WiC folder (train and dev) and a two-sentence corpus under tmp_path; the corpus."""
    save_bilm(bilm, tmp_path / "model")
    for split in ("train", "dev"):
        _wic(tmp_path / "wic" / split, split)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the cat sat on the mat .\na dog ran to the river bank .\n", encoding="utf-8")
    return corpus


def test_the_best_candidate_on_train_becomes_the_models_setting(tiny_bilm, tmp_path):
    corpus = _model_wic_corpus(tiny_bilm, tmp_path)
    output = tmp_path / "record.json"
    main(["--model", str(tmp_path / "model"), "--wic", str(tmp_path / "wic"), "--corpus", str(corpus),
          "--output", str(output), "--write"])
    record = json.loads(output.read_text(encoding="utf-8"))
    best = max(row["wic_train"] for row in record["candidates"])
    assert record["chosen"]["wic_train"] == best
    assert record["candidates"][0] == record["previous_default"]
    assert len(record["candidates"]) == 1 + 2 * 66  # the mean, then the 0.1 grid as it is and centred
    assert record["corpus"]["tokens"] == 15 and record["wic_train_pairs"] == len(PAIRS)
    assert 0.0 <= record["wic_dev"]["chosen"] <= 100.0
    for stage in ("before", "after"):
        assert len(record["sense_example"][stage]["pairs"]) == 6
    setting = load_native(tmp_path / "model").vector_setting
    np.testing.assert_allclose(setting.layer_weights, record["chosen"]["layer_weights"], atol=1e-4)
    assert (setting.layer_means is not None) == record["chosen"]["means_taken_off"]


def test_the_shipped_setting_is_the_one_its_record_chose():
    record = json.loads(RECORD.read_text(encoding="utf-8"))
    setting = load_native(shipped_model_dir()).vector_setting
    assert setting is not None, "the shipped model has no vectors.json"
    assert setting.weights_sha256 == record["provenance"]["model"]["weights_sha256"]
    np.testing.assert_allclose(setting.layer_weights, record["chosen"]["layer_weights"], atol=1e-4)
    assert (setting.layer_means is not None) == record["chosen"]["means_taken_off"]
    after = record["sense_example"]["after"]  # what the docs quote: apart or not, as the pairs say
    same = [p["similarity"] for p in after["pairs"] if p["same_sense"]]
    cross = [p["similarity"] for p in after["pairs"] if not p["same_sense"]]
    assert after["senses_apart"] == (min(same) > max(cross))
    assert (after["lowest_same_sense"], after["highest_cross_sense"]) == (min(same), max(cross))
    assert [s["text"] for s in record["sense_example"]["sentences"]] == [text for _, text in SENSE_EXAMPLE]


@pytest.mark.parametrize("missing", ["train", "dev"])
def test_a_missing_split_names_the_file(tiny_bilm, tmp_path, missing):
    save_bilm(tiny_bilm, tmp_path / "model")
    for split in ("train", "dev"):
        if split != missing:
            _wic(tmp_path / "wic" / split, split)
    with pytest.raises(FileNotFoundError, match=missing):
        main(["--model", str(tmp_path / "model"), "--wic", str(tmp_path / "wic"), "--output", str(tmp_path / "r.json")])


def test_the_vectors_command_chooses_as_the_lab_script_does_and_needs_no_checkout(tiny_bilm, tmp_path):
    from typer.testing import CliRunner

    from spacy_elmo.cli import app

    corpus = _model_wic_corpus(tiny_bilm, tmp_path)
    main(["--model", str(tmp_path / "model"), "--wic", str(tmp_path / "wic"), "--corpus", str(corpus),
          "--output", str(tmp_path / "lab.json")])
    result = CliRunner().invoke(app, ["vectors", "--model", str(tmp_path / "model"), "--wic", str(tmp_path / "wic"),
                                      "--input", str(corpus), "--output", str(tmp_path / "cli.json"), "--write"])
    assert result.exit_code == 0, result.output
    lab, cli = (json.loads((tmp_path / f"{name}.json").read_text(encoding="utf-8")) for name in ("lab", "cli"))
    assert cli["chosen"] == lab["chosen"] and cli["candidates"] == lab["candidates"]
    assert "chosen: layers" in result.output and "wrote" in result.output
    setting = load_native(tmp_path / "model").vector_setting
    assert setting.provenance["command"].startswith("python -m spacy_elmo vectors")
    # without --corpus: the package's general text gives the layer means
    result = CliRunner().invoke(app, ["vectors", "--model", str(tmp_path / "model"), "--wic", str(tmp_path / "wic")])
    assert result.exit_code == 0, result.output
