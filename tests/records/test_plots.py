"""Without matplotlib (``pip install .`` has no ``plot`` extra) every plot is skipped with one line
naming the extra, and the run's other results are written as usual."""
import json
import sys

import pytest

from spacy_elmo.records.plots import PLOT_EXTRA
from spacy_elmo.training.pretrain import pretrain

from lab.campaign import report_results as report

from ..training.conftest import tiny_config, write_corpus

EXTRA = f"spacy-elmo[{PLOT_EXTRA}]"


@pytest.fixture()
def no_matplotlib(monkeypatch):
    # a None entry makes `import matplotlib` raise ImportError, as when it is not installed
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)


def test_pretraining_finishes_and_writes_its_results_without_matplotlib(no_matplotlib, tmp_path, capsys):
    train = write_corpus(tmp_path / "data" / "train.txt", 200, seed=1)
    dev = write_corpus(tmp_path / "data" / "dev.txt", 30, seed=2)
    out = tmp_path / "out"
    summary = pretrain(tiny_config(train, dev, training__max_steps=6, training__eval_frequency=3), out)
    assert summary.steps == 6 and summary.stopped_by == "max_steps"
    kinds = [json.loads(line)["kind"] for line in (out / "metrics.jsonl").read_text(encoding="utf-8").splitlines()]
    assert "train" in kinds and "eval" in kinds
    assert (out / "model-last" / "model.safetensors").is_file() and (out / "model-best" / "config.json").is_file()
    assert not (out / "learning-curve.png").exists()
    lines = [line for line in capsys.readouterr().err.splitlines() if "matplotlib" in line]
    assert len(lines) == 1 and EXTRA in lines[0] and "learning-curve.png" in lines[0], lines


def test_report_writes_the_table_without_matplotlib(no_matplotlib, tmp_path, capsys):
    metrics = tmp_path / "metrics"
    metrics.mkdir()
    for setting, score in (("plain", 0.9), ("elmo", 0.92)):
        record = dict(task="upos", setting=setting, fraction_pct=100, score=score, train_sentences=50)
        (metrics / f"upos-{setting}-100.json").write_text(json.dumps(record), encoding="utf-8")
    report.main([str(metrics), "--table", str(tmp_path / "t.md"), "--plot", str(tmp_path / "p.png")])
    assert "| upos | 100 | 50 | 90.00 | 92.00 | +2.00 |" in (tmp_path / "t.md").read_text(encoding="utf-8")
    assert not (tmp_path / "p.png").exists()
    lines = [line for line in capsys.readouterr().err.splitlines() if "matplotlib" in line]
    assert len(lines) == 1 and EXTRA in lines[0] and "p.png" in lines[0], lines
