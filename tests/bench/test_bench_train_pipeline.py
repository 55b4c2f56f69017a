"""Smoke tests of the pretraining-step and pipeline benchmarks on a tiny model."""
import json

from bench import bench_pipeline, bench_train
from lab.records.check import check_record


def test_train_step_benchmark_compares_gradients(tmp_path):
    report = bench_train.main(["--quick", "--threads", "1", "--repeats", "1", "--json", str(tmp_path / "t.json")])
    assert json.loads((tmp_path / "t.json").read_text())["batch"] == report["batch"]
    assert report["loss_diff"] < 1e-4
    assert report["grad_rel_diff"] and max(report["grad_rel_diff"].values()) < 1e-4
    assert set(report["modes"]) == {"baseline", "ours"}
    assert all(m["tokens_per_s"] > 0 for m in report["modes"].values())
    assert check_record(report) == [] and list(report["provenance"]["data"]) == ["sample/ewt/train.conllu"]


def test_pipeline_benchmark_runs_every_mode(tmp_path):
    report = bench_pipeline.main(["--quick", "--threads", "1", "--json", str(tmp_path / "p.json")])
    assert check_record(report) == [] and list(report["provenance"]["data"]) == ["sample/ewt/test.conllu"]
    assert set(report["results"]) == {"optimize = false (as loaded)", "optimize = true (defaults)"}
    assert report["settings"]["optimize = true (defaults)"]["char_cache"]["hits"] > 0
    for results in report["results"].values():
        assert len(results) == 4
        assert any(name.startswith("nlp.pipe(n_process=2)") for name in results)
        assert all(r["tokens_per_s"] > 0 for r in results.values())
