import json

from ..training_runs import script

report = script("report_results")


def _write(folder, task, setting, pct, score, sentences):
    record = dict(task=task, setting=setting, fraction_pct=pct, score=score, train_sentences=sentences)
    (folder / f"{task}-{setting}-{pct}.json").write_text(json.dumps(record), encoding="utf-8")


def test_table_and_plot(tmp_path):
    metrics = tmp_path / "metrics"
    metrics.mkdir()
    for pct, sentences, plain, elmo in ((1, 125, 0.80, 0.86), (100, 12544, 0.95, 0.9612)):
        _write(metrics, "upos", "plain", pct, plain, sentences)
        _write(metrics, "upos", "elmo", pct, elmo, sentences)
    _write(metrics, "ner", "plain", 10, 0.5, 1404)
    report.main([str(metrics), "--table", str(tmp_path / "t.md"), "--plot", str(tmp_path / "p.png")])
    lines = (tmp_path / "t.md").read_text(encoding="utf-8").splitlines()
    assert lines[0] == "| task | train % | train sentences | without ELMo | with ELMo | ELMo - plain |"
    assert lines[2:] == [
        "| upos | 1 | 125 | 80.00 | 86.00 | +6.00 |",
        "| upos | 100 | 12,544 | 95.00 | 96.12 | +1.12 |",
        "| ner | 10 | 1,404 | 50.00 | - | - |",
    ]
    assert (tmp_path / "p.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
