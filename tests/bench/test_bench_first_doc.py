"""bench_first_doc: each path's runs summarised by median and range, its loops and kernels, and the
source path's median time over the wheel's; the committed record is the one the docs read."""
import json
from pathlib import Path

from bench.bench_first_doc import PATHS, TIMES, summary

ROOT = Path(__file__).resolve().parents[2]
RECORD = ROOT / "results" / "bench" / "amd-f25-m17" / "first-doc.json"


def _run(path, round_index, seconds, loop, source):
    return {"round": round_index, "path": path, **{key: seconds for key in TIMES}, "loops": [loop],
            "kernels": {"variant": "avx2", "source": source, "loaded": True}}


def test_the_summary_takes_each_paths_median_and_range_and_the_ratio_of_the_medians():
    runs = [_run("wheel", i, s, "compiled", "prebuilt") for i, s in enumerate((0.5, 0.7, 0.6))]
    runs += [_run("source", i, s, "compiled", "built here") for i, s in enumerate((9.0, 6.0, 12.0))]
    found = summary(runs)
    assert found["wheel"]["first_doc_s"] == {"median": 0.6, "min": 0.5, "max": 0.7}
    assert found["source"]["to_first_doc_s"] == {"median": 9.0, "min": 6.0, "max": 12.0}
    assert found["wheel"]["kernels"] == ["prebuilt"] and found["source"]["kernels"] == ["built here"]
    assert found["source_over_wheel"] == 15.0


def test_the_committed_record_ran_the_prebuilt_kernels_on_the_wheel_and_compiled_them_on_the_source_path():
    record = json.loads(RECORD.read_text(encoding="utf-8"))
    assert {run["path"] for run in record["runs"]} == set(PATHS)
    for run in record["runs"]:
        assert run["loops"] == ["compiled"]
        assert run["kernels"]["source"] == ("prebuilt" if run["path"] == "wheel" else "built here")
    assert record["summary"] == summary(record["runs"])
