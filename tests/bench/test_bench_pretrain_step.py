"""Smoke test of the pretraining-step benchmark on a tiny model: every setting measured, ratios to fp32."""
import json

from bench import bench_pretrain_step
from bench.workloads import first_batch


def test_every_setting_measured_with_its_ratio_to_fp32(tmp_path):
    out = tmp_path / "step.json"
    report = bench_pretrain_step.main(["--quick", "--rounds", "2", "--threads", "1,2", "--json", str(out)])
    rows = {(r["precision"], r["threads"]): r for r in report["rows"]}
    assert set(rows) == {("fp32", 1), ("bf16", 1), ("fp32", 2), ("bf16", 2)}
    assert all(r["tokens_per_s_median"] > 0 and r["batch_tokens"] > 0 for r in rows.values())
    assert rows[("fp32", 2)]["x_fp32_median"] == 1.0 and rows[("bf16", 2)]["x_fp32_median"] > 0
    assert json.loads(out.read_text())["rows"] == report["rows"]
    assert "x fp32" in out.with_suffix(".md").read_text() and report["machine"]["cpu_flags"] is not None


def test_first_batch_stops_at_either_cap():
    sentences = [["a"] * 3, ["b"] * 4, ["c"] * 5]
    assert first_batch(sentences, 10, 7) == sentences[:2]
    assert first_batch(sentences, 1, 100) == sentences[:1]
