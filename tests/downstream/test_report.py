"""The downstream experiment's report as the user's project writes it (`downstream-report`): the table,
the plot and every run's metrics, from a metrics folder of runs."""
import json

from typer.testing import CliRunner

from spacy_elmo.cli import app


def _write(folder, task, setting, pct, score, sentences):
    record = dict(task=task, setting=setting, fraction_pct=pct, score=score, train_sentences=sentences,
                  provenance={"command": f"train {task} {setting} {pct}"})
    (folder / f"{task}-{setting}-{pct}.json").write_text(json.dumps(record), encoding="utf-8")


def test_the_report_writes_the_table_the_plot_and_every_runs_metrics(tmp_path):
    metrics = tmp_path / "runs" / "metrics"
    metrics.mkdir(parents=True)
    for pct, sentences, plain, elmo in ((1, 10, 0.5, 0.625), (100, 1000, 0.9, 0.875)):
        _write(metrics, "upos", "plain", pct, plain, sentences)
        _write(metrics, "upos", "elmo", pct, elmo, sentences)
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["downstream-report", "--input", str(metrics), "--table", str(out / "t.md"), "--plot",
                                      str(out / "p.png"), "--records", str(out / "r.json"), "--title", "Sample"])
    assert result.exit_code == 0, result.output
    lines = (out / "t.md").read_text(encoding="utf-8").splitlines()
    assert lines[0] == "### Sample" and lines[2] == "| task | train % | train sentences | without ELMo | with ELMo | ELMo - plain |"
    assert lines[4:] == ["| upos | 1 | 10 | 50.00 | 62.50 | +12.50 |", "| upos | 100 | 1,000 | 90.00 | 87.50 | -2.50 |"]
    assert (out / "p.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    records = json.loads((out / "r.json").read_text(encoding="utf-8"))
    assert [(r["setting"], r["fraction_pct"]) for r in records["runs"]] == [("elmo", 1), ("plain", 1), ("elmo", 100), ("plain", 100)]
    assert records["runs"][0]["provenance"] == {"command": "train upos elmo 1"}
    assert records["provenance"]["date"] and "start_commit" in records["provenance"]


def test_an_empty_metrics_folder_is_refused_saying_what_to_run(tmp_path):
    result = CliRunner().invoke(app, ["downstream-report", "--input", str(tmp_path), "--table", str(tmp_path / "t.md")])
    assert result.exit_code != 0 and "no metrics (*.json)" in result.output and "downstream-train" in result.output
    assert not (tmp_path / "t.md").exists()
