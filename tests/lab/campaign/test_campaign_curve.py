import json

import pytest

from lab.campaign import campaign_curve



def _stretch(folder, evals, *, steps, tokens, seconds, before=None):
    folder.mkdir(parents=True)
    lines = [{"kind": "train", "step": 1, "loss": 5.0, "train_ppl": 150.0}]
    lines += [{"kind": "eval", "step": step, "dev_ppl": ppl, "probe": {"scores": {"layer 0": 80.0, "layer 1": probe}}}
              for step, ppl, probe in evals]
    (folder / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    report = {"steps": steps, "tokens": tokens, "seconds": seconds, "before": before}
    (folder / "finetune-report.json").write_text(json.dumps(report), encoding="utf-8")
    return folder


def test_the_second_stretch_adds_on_to_the_first(tmp_path):
    first = _stretch(tmp_path / "one" / "pretrain", [(100, 90.0, 88.0), (200, 80.0, 88.5)], steps=200, tokens=2_000_000,
                     seconds=3600, before={"ppl": 200.0})
    second = _stretch(tmp_path / "two" / "pretrain", [(50, 78.0, 89.0)], steps=100, tokens=1_000_000, seconds=1800)
    out = tmp_path / "curve.json"
    assert campaign_curve.main([str(first), str(second), "--names", "a", "b", "--records", str(out),
                                "--plot", str(tmp_path / "c.png")]) == 0
    points = json.loads(out.read_text(encoding="utf-8"))["points"]
    assert [(p["stretch"], p["step"], p["tokens"], p["hours"], p["dev_ppl"]) for p in points] == [
        ("a", 0, 0, 0.0, 200.0), ("a", 100, 1_000_000, 0.5, 90.0), ("a", 200, 2_000_000, 1.0, 80.0),
        ("b", 50, 2_500_000, 1.25, 78.0),
    ]
    assert points[-1]["probe"]["layer 1"] == 89.0
    assert (tmp_path / "c.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_an_unfinished_run_is_named(tmp_path):
    empty = tmp_path / "run"
    empty.mkdir()
    with pytest.raises(SystemExit, match="metrics.jsonl"):
        campaign_curve.main([str(empty), "--records", str(tmp_path / "c.json")])
    zero = _stretch(tmp_path / "zero", [], steps=0, tokens=0, seconds=0)
    with pytest.raises(SystemExit, match="positive 'steps'"):
        campaign_curve.main([str(zero), "--records", str(tmp_path / "c.json")])
    with pytest.raises(SystemExit):
        campaign_curve.main([str(zero), "--names", "a", "b", "--records", str(tmp_path / "c.json")])
