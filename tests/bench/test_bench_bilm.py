"""Smoke test of the benchmark scripts on a tiny model: they run, check equality, and report."""
import json

import pytest

from bench import bench_bilm
from bench.report import targets
from spacy_elmo.fast import compiled
from lab.records.check import check_record


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench")
    argv = ["--quick", "--threads", "1", "--json", str(out / "r.json"), "--markdown", str(out / "r.md")]
    result = bench_bilm.main(argv)
    assert json.loads((out / "r.json").read_text()) == json.loads(json.dumps(result))
    result["markdown"] = (out / "r.md").read_text()
    return result


def test_every_mode_measured_on_both_workloads(report):
    tiny = report["shapes"]["tiny"]
    for workload in ("batch", "single"):
        modes = tiny[workload]["modes"]
        assert {"baseline", "ours", "ours_opt", "fp16", "int8"} <= set(modes)
        assert all(m["tokens_per_s"] > 0 and m["seconds"] > 0 for m in modes.values())
        assert modes["baseline"]["speedup_vs_baseline"] == 1.0
    assert tiny["batch"]["tokens"] == report["sentences"]["tokens"]
    assert report["gemm"]["peak"] > 0 and tiny["matvec"]["rate"] > 0


def test_the_report_names_its_model_and_data(report):
    record = {k: v for k, v in report.items() if k != "markdown"}
    assert check_record(record) == []
    assert record["provenance"]["model"] is None and "tiny" in record["provenance"]["model_note"]
    assert list(record["provenance"]["data"]) == ["sample/ewt/test.conllu"]


def test_outputs_checked_against_baseline_and_fp32(report):
    tiny = report["shapes"]["tiny"]
    for workload in ("batch", "single"):
        modes = tiny[workload]["modes"]
        assert modes["ours"]["max_abs_diff_vs_baseline"] < bench_bilm.EQUAL_ATOL
        assert modes["ours_opt"]["max_abs_diff_vs_baseline"] < bench_bilm.EQUAL_ATOL
        assert modes["fp16"]["cosine_mean"] > 0.999
        assert 0.99 < modes["int8"]["cosine_mean"] < 1.0
        if report["machine"]["compiled_step"]:  # the same optimized model with the Python loop
            assert modes["ours_opt_pystep"]["max_abs_diff_vs_baseline"] < bench_bilm.EQUAL_ATOL
    assert 0 < tiny["char_cache"]["hit_rate"] < 1
    assert report["machine"]["compiled_step"] == (compiled.compiled_step() is not None)
    assert ("Optimized fp32 timestep loop: compiled" in report["markdown"]) == report["machine"]["compiled_step"]


def test_markdown_has_tables_and_targets(report):
    text = report["markdown"]
    assert "| batch | tokens/s | x baseline |" in text and "| one sentence | tokens/s |" in text
    assert "python -m bench.bench_bilm --quick" in text
    # the speed targets are printed for the full model only; checked here on the tiny one's numbers
    assert "targets are set for the full model" in text and "| target | measured | met |" not in text
    rows = targets(report["shapes"]["tiny"])
    assert rows[0] == "| target | measured | met |" and any("one sentence: optimized fp32" in row for row in rows)
    assert "repeat by repeat" in text and "median" in text


def test_bound_for_the_work_done_leaves_out_what_the_caches_skip(report):
    tiny = report["shapes"]["tiny"]
    work = tiny["batch"]["work"]
    assert 0 < work["uncached_tokens"] < work["distinct_tokens"] <= work["positions"]
    assert 0 < work["done_flops"] < work["nominal_flops"]
    modes = tiny["batch"]["modes"]
    assert "pct_gemm_bound_work_done" not in modes["ours"]
    # the same bound scaled to the work done: smaller than the nominal percentage by exactly that ratio
    ratio = work["done_flops"] / work["nominal_flops"]
    assert abs(modes["ours_opt"]["pct_gemm_bound_work_done"] - modes["ours_opt"]["pct_gemm_bound"] * ratio) < 1e-6
    assert "FLOPs done" in report["markdown"] and "remove" in report["markdown"]
