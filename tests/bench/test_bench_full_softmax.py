"""Smoke test of the full-softmax benchmark on a small shape: every setting scores the same tokens to
the same perplexity, and the record passes the results check. The settings run in this process
(the benchmark runs each in its own, for its peak RSS: a process start is what this test saves)."""
import argparse
import json

from bench import bench_full_softmax
from lab.records.check import check_record


def test_the_settings_score_the_same_tokens_alike_and_the_record_is_complete(tmp_path, monkeypatch):
    def in_process(args: argparse.Namespace, chunk_size: int):
        return bench_full_softmax.worker(argparse.Namespace(**{**vars(args), "worker": chunk_size}))

    monkeypatch.setattr(bench_full_softmax, "run_setting", in_process)
    out = tmp_path / "full-softmax.json"
    argv = ["--shape", "small", "--vocab", "3000", "--sentences", "2", "--words", "4", "--repeats", "1",
            "--json", str(out)]
    assert bench_full_softmax.main(argv) == 0
    record = json.loads(out.read_text())
    runs = record["runs"]
    assert [r["setting"] for r in runs] == list(bench_full_softmax.SETTINGS)
    assert len({r["tokens"] for r in runs}) == 1 and runs[0]["tokens"] == 2 * 5
    ppl = [r["ppl"] for r in runs]
    assert max(ppl) - min(ppl) <= 0.1 + 1e-5 * max(ppl)  # chunked or whole: the same numbers
    assert record["summary"]["whole matrix"]["x_whole_matrix_speed"] == 1.0
    assert all(r["peak_rss_mb"] >= r["rss_built_mb"] > 0 and r["tokens_per_s"] > 0 for r in runs)
    assert "| chunks of 8,192 |" in out.with_suffix(".md").read_text()
    assert check_record(record) == []
