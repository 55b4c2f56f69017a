import json
import subprocess

import numpy as np
import pytest
import typer
from typer.testing import CliRunner

from spacy_elmo import load_bilm
from spacy_elmo.cli import app
from spacy_elmo.io import load_allennlp
from spacy_elmo.cli._training_options import parse_duration
from lab.records.check import check_record

from ..training.conftest import PYTHON, ROOT, TINY_CFG, cli_env, write_corpus

runner = CliRunner()


def test_parse_duration():
    assert parse_duration("90") == 90 and parse_duration("50m") == 3000 and parse_duration("1.5h") == 5400
    assert parse_duration(None) is None
    with pytest.raises(typer.BadParameter):
        parse_duration("soon")


def test_pretrain_evaluate_finetune_commands(tmp_path):
    train = write_corpus(tmp_path / "train.txt", 200, seed=1)
    dev = write_corpus(tmp_path / "dev.txt", 30, seed=2)
    out = tmp_path / "out"
    result = runner.invoke(app, ["pretrain", str(TINY_CFG), "--output", str(out), "--paths.train", str(train),
                                 "--paths.dev", str(dev), "--training.max_steps", "12", "--training.eval_frequency", "6"])
    assert result.exit_code == 0, result.output
    assert "12 steps" in result.output and "best held-out ppl" in result.output
    assert (out / "model-best" / "config.json").is_file() and (out / "checkpoints" / "step-00000012").is_dir()

    again = runner.invoke(app, ["pretrain", str(TINY_CFG), "--output", str(out), "--paths.train", str(train)])
    assert again.exit_code == 1 and "--resume" in again.output and "Traceback" not in again.output

    report = tmp_path / "eval.json"
    result = runner.invoke(app, ["evaluate", "--model", str(out / "model-best"), "--input", str(dev), "--output", str(report)])
    assert result.exit_code == 0, result.output
    numbers = json.loads(report.read_text())
    best = [json.loads(l) for l in (out / "metrics.jsonl").read_text().splitlines() if '"eval"' in l]
    assert numbers["ppl"] == pytest.approx(min(r["ppl"] for r in best), rel=1e-5)
    assert check_record(numbers) == [] and numbers["provenance"]["model"]["version"] == "pretrain step 12"
    assert check_record(json.loads((out / "corpus-stats.json").read_text())) == []
    assert f"perplexity {numbers['ppl']:.4g}" in result.output

    exported = tmp_path / "published"
    result = runner.invoke(app, ["convert", "--model", str(out / "model-best"), "--output", str(exported), "--to-allennlp"])
    assert result.exit_code == 0, result.output
    sentence = [["the", "red", "cat"]]
    assert np.allclose(load_allennlp(exported / "options.json", exported / "weights.hdf5").embed(sentence)[0],
                       load_bilm(out / "model-best").embed(sentence)[0], atol=1e-6)

    result = runner.invoke(app, ["finetune", str(TINY_CFG), "--model", str(out / "model-best"), "--output", str(tmp_path / "ft"),
                                 "--paths.train", str(dev), "--paths.dev", str(dev), "--training.max_steps", "6"])
    assert result.exit_code == 0, result.output
    assert "held-out perplexity" in result.output and (tmp_path / "ft" / "finetune-report.json").is_file()
    report = json.loads((tmp_path / "ft" / "finetune-report.json").read_text())
    assert check_record(report) == [] and report["provenance"]["model"]["version"] == "pretrain step 12"


def test_evaluate_refuses_a_model_without_softmax(tmp_path):
    from spacy_elmo.io import load_allennlp, save_bilm

    data = ROOT / "tests" / "data" / "allennlp" / "tiny"
    save_bilm(load_allennlp(data / "options.json", data / "weights.hdf5"), tmp_path / "bare")
    (tmp_path / "d.txt").write_text("a b\n", encoding="utf-8")
    result = runner.invoke(app, ["evaluate", "--model", str(tmp_path / "bare"), "--input", str(tmp_path / "d.txt")])
    # the error box wraps the message: read it as one line
    message = " ".join(result.output.replace("\u2502", " ").split())
    assert result.exit_code != 0 and "fine-tune it first" in message


def test_commands_are_registered_under_spacy():
    result = subprocess.run([PYTHON, "-m", "spacy", "elmo", "--help"], env=cli_env(), cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    for command in ("pretrain", "finetune", "evaluate"):
        assert command in result.stdout


@pytest.mark.parametrize("override", [["--training.bogus", "1"], ["--nosection.x", "1"], ["--training.mode", "stream"]])
def test_bad_overrides_are_reported(tmp_path, override):
    result = runner.invoke(app, ["pretrain", str(TINY_CFG), "--output", str(tmp_path / "out"), *override])
    assert result.exit_code == 2
    assert not (tmp_path / "out").exists()
