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


def test_a_resumed_runs_parts_each_cover_their_own_steps(tmp_path):
    # one folder, one metrics.jsonl across both parts; each part's report counts only its own tokens
    run = _stretch(tmp_path / "run", [(100, 90.0, 88.0), (200, 80.0, 88.5), (300, 70.0, 89.0)], steps=300,
                   tokens=1_000_000, seconds=1800, before={"ppl": 200.0})
    part1 = run / "part1-finetune-report.json"
    part1.write_text(json.dumps({"steps": 200, "tokens": 4_000_000, "seconds": 7200, "before": {"ppl": 200.0}}), encoding="utf-8")
    part2 = run / "part2-finetune-report.json"
    part2.write_text(json.dumps({"steps": 300, "tokens": 1_000_000, "seconds": 1800}), encoding="utf-8")
    out = tmp_path / "curve.json"
    assert campaign_curve.main([str(part1), str(part2), "--names", "third", "third", "--records", str(out)]) == 0
    record = json.loads(out.read_text(encoding="utf-8"))
    assert [(p["step"], p["tokens"], p["hours"]) for p in record["points"]] == [
        (0, 0, 0.0), (100, 2_000_000, 1.0), (200, 4_000_000, 2.0), (300, 5_000_000, 2.5),
    ]
    assert [s["start_step"] for s in record["stretches"]] == [0, 200]
    # a report that says where it resumed needs no neighbour; parts out of order are refused
    part2.write_text(json.dumps({"steps": 300, "start_step": 250, "tokens": 1_000_000, "seconds": 1800}), encoding="utf-8")
    assert campaign_curve.main([str(part2), "--names", "x", "--records", str(out)]) == 0
    assert [(p["step"], p["tokens"]) for p in json.loads(out.read_text(encoding="utf-8"))["points"]] == [(300, 1_000_000)]
    part2.write_text(json.dumps({"steps": 300, "tokens": 1_000_000, "seconds": 1800}), encoding="utf-8")
    with pytest.raises(SystemExit, match="in the order they ran"):
        campaign_curve.main([str(part2), str(part1), "--names", "third", "third", "--records", str(out)])


def test_a_part_stopped_without_a_report_is_read_from_its_metrics(tmp_path):
    run = _stretch(tmp_path / "run", [(100, 90.0, 88.0), (200, 80.0, 88.5)], steps=100, tokens=500_000, seconds=1000)
    (run / "finetune-report.json").rename(run / "part1-finetune-report.json")
    # the second part, steps 100-200, killed: its records every 50 steps at 1,000 tokens/s, 100 s apart
    rows = [{"kind": "train", "step": step, "loss": 4.0, "tokens_per_s": 1000.0, "time": 5000.0 + 2 * (step - 150)}
            for step in (150, 200)]
    with (run / "metrics.jsonl").open("a", encoding="utf-8") as metrics:
        metrics.write("".join(json.dumps(row) + "\n" for row in rows))
    out = tmp_path / "curve.json"
    assert campaign_curve.main([str(run / "part1-finetune-report.json"), f"{run / 'metrics.jsonl'}@100-200",
                                "--names", "s", "s", "--records", str(out)]) == 0
    record = json.loads(out.read_text(encoding="utf-8"))
    # 100 s between its records at 1,000 tokens/s, and its first 50 steps at the same 2 s a step
    assert record["stretches"][1]["tokens"] == 200_000 and record["stretches"][1]["seconds"] == 200.0
    assert [(p["step"], p["tokens"]) for p in record["points"]] == [(100, 500_000), (200, 700_000)]
    with pytest.raises(SystemExit, match="two or more training records"):
        campaign_curve.main([f"{run / 'metrics.jsonl'}@100-250", "--records", str(out)])
