import json
import shutil

import srsly

from spacy_elmo.files import file_sha256
from lab.records.check import check_record

from lab.campaign import run_experiment as experiment

from ...training_runs import STEPS, make_data, make_textcat_data



def test_plain_and_elmo_cells_record_test_and_dev_scores_and_are_not_rerun(tmp_path, capsys):
    data = make_data(tmp_path / "data")
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    shutil.copy(data / "train.spacy", corpus / "upos-train-1.spacy")
    shutil.copy(data / "dev.spacy", corpus / "upos-dev.spacy")
    shutil.copy(data / "dev.spacy", corpus / "upos-test.spacy")
    out = tmp_path / "out"
    args = ["--corpus", str(corpus), "--output", str(out), "--elmo", str(data / "bilm"), "--tasks", "upos"]
    args += ["--fractions", "1", "--training.max_steps", str(STEPS), "--training.eval_frequency", str(STEPS // 2)]
    experiment.main(args)
    for setting, config in (("plain", "configs/tagger.cfg"), ("elmo", "configs/tagger-elmo.cfg")):
        record = json.loads((out / "metrics" / f"upos-{setting}-1.json").read_text(encoding="utf-8"))
        assert (record["task"], record["setting"], record["fraction_pct"], record["config"]) == ("upos", setting, 1, config)
        meta = srsly.read_json(out / "models" / f"upos-{setting}-1" / "model-best" / "meta.json")
        # the dev score is the one that chose model-best; test is scored here on another copy of dev
        assert record["dev_score"] == meta["performance"]["tag_acc"]
        assert abs(record["score"] - record["dev_score"]) < 1e-6
        assert 0.0 < record["score"] <= 1.0 and record["train_sentences"] == 40
        assert record["overrides"]["training.max_steps"] == STEPS
        # the cell names the commit it started from, its biLM (none for plain) and the .spacy files it read
        assert check_record(record) == [], check_record(record)
        assert sorted(record["provenance"]["data"].values()) == sorted(
            file_sha256(corpus / f"upos-{name}.spacy") for name in ("train-1", "dev", "test"))
    elmo = json.loads((out / "metrics" / "upos-elmo-1.json").read_text())["provenance"]["model"]
    assert elmo["weights_sha256"] == file_sha256(data / "bilm" / "model.safetensors")
    assert json.loads((out / "metrics" / "upos-elmo-1.json").read_text())["overrides"]["paths.elmo"] == f".../{tmp_path.name}/data/bilm"
    capsys.readouterr()
    experiment.main(args)
    assert capsys.readouterr().out.count("exists: skipped") == 2


def test_textcat_cells_score_accuracy_on_test_and_on_dev(tmp_path):
    data = make_textcat_data(tmp_path / "data")
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for name in ("train-1", "dev", "test"):
        shutil.copy(data / ("train.spacy" if name == "train-1" else "dev.spacy"), corpus / f"textcat-{name}.spacy")
    out = tmp_path / "out"
    experiment.main(["--corpus", str(corpus), "--output", str(out), "--tasks", "textcat", "--fractions", "1", "--settings", "plain",
                     "--training.max_steps", str(STEPS), "--training.eval_frequency", str(STEPS // 2)])
    record = json.loads((out / "metrics" / "textcat-plain-1.json").read_text(encoding="utf-8"))
    meta = srsly.read_json(out / "models" / "textcat-plain-1" / "model-best" / "meta.json")
    # one label per review: the micro-averaged F1 is the accuracy, on test and on dev alike
    assert record["metric"] == "cats_accuracy" and record["score"] == record["scores"]["cats_micro_f"]
    assert record["dev_score"] == meta["performance"]["cats_micro_f"]
    assert abs(record["score"] - record["dev_score"]) < 1e-6
