"""Smoke test of the kernel-variant benchmark on the tiny shape: every variant this CPU runs, and the
Python loop, timed round by round against portable on one sentence and on batches, and written."""
import json

import pytest

from bench import bench_kernel_variants
from lab.records.check import check_record
from spacy_elmo.fast import kernel_library, kernel_variants


@pytest.mark.skipif(kernel_library.compiler() is None, reason="no C++ compiler here")
def test_every_variant_the_cpu_runs_is_timed_against_portable_and_written(tmp_path):
    out, md = tmp_path / "kernel-variants.json", tmp_path / "kernel-variants.md"
    report = bench_kernel_variants.main(["--quick", "--json", str(out), "--markdown", str(md)])
    modes = [bench_kernel_variants.PYTHON_LOOP, *(v.name for v in kernel_variants.runnable())]
    assert json.loads(out.read_text())["results"] == report["results"]
    for clock, workload in [(c, w) for c in ("cpu", "wall") for w in ("one sentence", "batch")]:
        rows = report["results"][clock][workload]
        assert list(rows) == modes
        assert rows["portable"]["x_portable_per_round"] == [1.0] * report["rounds"]
        for row in rows.values():
            assert len(row["round_seconds"]) == report["rounds"] and row["tokens_per_s_median"] > 0
            low, high = row["x_portable_range"]
            assert low <= row["x_portable_median"] <= high
    # every variant computes what the Python loop does, to float32 rounding
    assert all(d < 1e-5 for d in report["max_abs_difference_from_python_loop"].values())
    assert report["machine"]["kernel_variant_chosen"] == kernel_variants.chosen().name
    assert f"| one sentence | {modes[-1]} |" in md.read_text()
    assert [p for p in check_record(report) if not p.startswith("provenance.dirty_note")] == []
