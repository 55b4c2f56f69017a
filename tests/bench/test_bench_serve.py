"""Smoke test of the served pipeline's load benchmark on the tiny shape: every level of both body
formats answered, the bodies' sizes against their raw floats, the overload run refusing with 503, the
record written with its provenance."""
import json

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
pytest.importorskip("httpx")

from bench import bench_serve  # noqa: E402
from lab.records.check import check_record  # noqa: E402


def test_the_quick_run_measures_both_formats_sizes_and_an_overload(tmp_path):
    out = tmp_path / "serve-bench.json"
    report = bench_serve.main(["--quick", "--levels", "1,4", "--requests", "4", "--overload-requests", "24",
                               "--overload-queue", "4", "--json", str(out)])
    assert json.loads(out.read_text())["shapes"].keys() == {"tiny"}
    shape = report["shapes"]["tiny"]
    for fmt in ("json", "msgpack"):
        assert [level["clients"] for level in shape["levels"][fmt]] == [1, 4]
        for level in shape["levels"][fmt]:
            assert level["statuses"] == {"200": 4} and level["latency_ms"]["p50"] <= level["latency_ms"]["p99"]
    bodies = shape["sizes"]["bodies"]
    assert shape["sizes"]["tokens"] == 24
    assert bodies["msgpack, layers"]["over_raw"] <= 1.1
    assert bodies["json, mixed, base64, gzip"]["content_encoding"] == "gzip"
    assert bodies["json, mixed, base64 (the default)"]["bytes"] < bodies["json, layers, numbers (the body before 0.10)"]["bytes"]
    overload = report["overload"]
    assert overload["statuses"].get("503", 0) == overload["server"]["rejected_overload"] > 0
    # computed or dropped: at most the flood, and the probes the queue took once it had drained
    accepted_probes = overload["probes"]["statuses"].get("200", 0)
    assert overload["server"]["texts"] + overload["server"]["dropped_disconnected"] <= 24 + accepted_probes
    assert [p for p in check_record(report) if not p.startswith("provenance.dirty_note")] == []
