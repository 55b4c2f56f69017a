"""bench/bandwidth.py on small buffers: the record's structure and the bytes each kernel counts (no timings checked)."""
import json
import math

import pytest

from bench import bandwidth
from bench.hardware import weights_regime
from lab.records.check import check_record

ELEMENTS = 5000  # not a multiple of the numpy triad's block, so the last block is a short one


@pytest.mark.parametrize("backend", ["torch", "numpy"])
@pytest.mark.parametrize("kernel,arrays", [("triad", 3), ("copy", 2), ("read", 1)])
def test_bytes_counted_per_pass(backend, kernel, arrays):
    result = bandwidth.measure(kernel, ELEMENTS, backend=backend, threads=1, repeats=3)
    assert result["bytes_per_pass"] == arrays * ELEMENTS * 8  # float64
    assert result["array_bytes"] == ELEMENTS * 8 and result["arrays"] == arrays
    assert result["check"]  # the kernel computed a = b + 3 * c (or a = b, or the sum of b) over every element
    assert len(result["seconds"]) == 3
    assert result["gb_per_s_min"] <= result["gb_per_s_median"] <= result["gb_per_s_best"]
    # GB/s is the counted bytes over each repeat's time
    best = min(result["seconds"])
    assert result["gb_per_s_best"] == pytest.approx(result["bytes_per_pass"] / best / 1e9)


def test_bytes_follow_the_dtype():
    assert bandwidth.bytes_moved("triad", 10, 8) == 240
    assert bandwidth.measure("triad", 1000, dtype="float32", repeats=1)["bytes_per_pass"] == 3 * 1000 * 4


def test_unknown_kernel_and_threaded_numpy_are_refused():
    with pytest.raises(ValueError, match="kernel"):
        bandwidth.measure("scale", 10)
    with pytest.raises(ValueError, match="one thread"):
        bandwidth.measure("triad", 10, backend="numpy", threads=2)


def test_record_structure(tmp_path):
    out = tmp_path / "bw.json"
    record = bandwidth.main(["--output", str(out), "--threads", "1", "2", "--repeats", "2", "--array-mib", "0.25"])
    assert json.loads(out.read_text()) == json.loads(json.dumps(record))
    assert record["command"].startswith("python -m bench.bandwidth --output")
    assert record["provenance"]["command"] == record["command"]
    assert check_record(json.loads(out.read_text())) == []  # every field of the results record, no machine path
    assert record["array_bytes"] == 256 * 1024
    assert len(record["load_average_before"]) == 3 and len(record["load_average_after"]) == 3
    assert {"model", "flags", "cpu_count"} <= set(record["cpu"])
    seen = {(r["backend"], r["kernel"], r["threads"]) for r in record["results"]}
    # torch at each thread count, numpy on one thread only
    kernels = ("read", "copy", "triad")
    assert seen == {("torch", k, n) for k in kernels for n in (1, 2)} | {("numpy", k, 1) for k in kernels}
    assert set(record["triad_torch_gb_per_s"]) == set(record["read_torch_gb_per_s"]) == {"1", "2"}
    for rates in record["read_torch_gb_per_s"].values():  # the read rate is a rate: positive and finite
        assert all(0 < rates[k] < math.inf for k in ("best", "median", "min"))
    for r in record["results"]:
        assert r["elements"] == 256 * 1024 // 8 and r["bytes_per_pass"] == r["arrays"] * 256 * 1024
    assert "triad" in "\n".join(bandwidth.summary_lines(record)) and "| read |" in "\n".join(bandwidth.summary_lines(record))


def test_cache_sizes_from_sysfs(tmp_path):
    for index, (level, kind, size) in enumerate([(1, "Data", "32K"), (1, "Instruction", "32K"), (2, "Unified", "1024K"),
                                                   (3, "Unified", "32768K")]):
        folder = tmp_path / f"index{index}"
        folder.mkdir()
        (folder / "level").write_text(f"{level}\n")
        (folder / "type").write_text(f"{kind}\n")
        (folder / "size").write_text(f"{size}\n")
    caches = bandwidth.cache_sizes(tmp_path)
    assert {name: c["bytes"] for name, c in caches.items()} == {
        "L1d": 32 << 10, "L1i": 32 << 10, "L2": 1 << 20, "L3": 32 << 20}
    assert bandwidth.last_level_cache(caches) == 32 << 20
    assert bandwidth.default_array_bytes(caches) == 128 << 20


@pytest.mark.parametrize("text,expected", [("32K", 32768), ("2 MiB", 2 << 20), ("48 KiB", 48 << 10), ("512", 512)])
def test_parse_size(text, expected):
    assert bandwidth.parse_size(text) == expected


def test_weights_regime():
    caches = {"L2": 1 << 20, "L3": 32 << 20}
    assert weights_regime(1_500_000, caches, threads=2) == "L2"  # within two private L2s
    assert weights_regime(5_242_880, caches, threads=2) == "L3"  # the shipped model's recurrent weights
    assert weights_regime(167_772_160, caches, threads=2) == "memory"  # the full model's
    assert weights_regime(10, {}, threads=1) == "unknown"


def test_the_read_only_kernel_reads_one_array_and_writes_nothing_of_its_size():
    result = bandwidth.measure("read", ELEMENTS, threads=2, repeats=3, dtype="float32")
    assert result["bytes_per_pass"] == ELEMENTS * 4 and result["arrays"] == 1
    assert result["check"]  # the sum of 0 .. ELEMENTS - 1
    assert 0 < result["gb_per_s_min"] <= result["gb_per_s_best"] < math.inf
