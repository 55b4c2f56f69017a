"""Two revisions on one benchmark, interleaved: worktrees of the revisions, each run importing its own code."""
import subprocess
from pathlib import Path

import pytest

from bench import ab_revisions
from lab.records.check import check_record

ROOT = Path(__file__).resolve().parent.parent.parent


def test_metric_reads_a_dotted_path():
    report = {"rows": [{"tokens_per_s_median": 12.5}], "a": {"b": 3}}
    assert ab_revisions.metric(report, "rows.0.tokens_per_s_median") == 12.5
    assert ab_revisions.metric(report, "a.b") == 3.0
    with pytest.raises(KeyError):
        ab_revisions.metric(report, "rows.0.missing")


@pytest.mark.slow
def test_two_revisions_of_a_clone_run_interleaved_from_their_own_trees(tmp_path):
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "--quiet", "--no-local", str(ROOT), str(clone)], check=True)
    head = subprocess.run(["git", "-C", str(clone), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    out = tmp_path / "ab.json"
    argv = ["--repo", str(clone), "--base", "HEAD", "--new", "HEAD", "--rounds", "2", "--metric",
            "rows.0.tokens_per_s_median", "--json", str(out), "--", "bench.bench_pretrain_step", "--quick", "--rounds", "1"]
    report = ab_revisions.main(argv)
    assert len(report["values"]["base"]) == len(report["values"]["new"]) == 2
    assert all(v > 0 for v in report["values"]["base"] + report["values"]["new"])
    assert report["ratios"] == [n / b for n, b in zip(report["values"]["new"], report["values"]["base"])]
    assert report["base"]["commit"] == report["new"]["commit"] == head
    # the runs' own records name their model (random weights) and data (the quick run's own sentences)
    assert check_record(report) == [] and report["provenance"]["model"] is None
    assert "new / base: median" in out.with_suffix(".md").read_text(encoding="utf-8")
    # the worktrees are gone again
    listed = subprocess.run(["git", "-C", str(clone), "worktree", "list"], capture_output=True, text=True).stdout
    assert len(listed.strip().splitlines()) == 1
