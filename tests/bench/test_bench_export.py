"""Smoke test of the export benchmark on en_small: every runtime timed in interleaved repeats from token
strings, its layers within 1e-5 of the reference, the record written with its provenance."""
import json

import pytest

from bench import bench_export
from lab.records.check import check_record


def test_every_runtime_is_timed_interleaved_and_matches_the_reference(tmp_path):
    pytest.importorskip("onnxruntime")
    out = tmp_path / "bench-export.json"
    report = bench_export.main(["--quick", "--test-data", "sample/ewt/test.conllu", "--load", "a test run",
                                "--json", str(out)])
    assert json.loads(out.read_text())["shapes"].keys() == report["shapes"].keys() == {"en_small"}
    result = report["shapes"]["en_small"]
    assert set(result["tokens_per_s"]) == set(bench_export.MODES)
    for mode, stats in result["tokens_per_s"].items():
        assert len(stats["seconds"]) == 2 and stats["min"] <= stats["median"] <= stats["max"]
        assert result["max_abs_diff_to_reference"][mode] <= 1e-5
    assert report["note"].startswith("a test run") and len(report["load_average"]["before"]) == 3
    assert [p for p in check_record(report) if not p.startswith("provenance.dirty_note")] == []
