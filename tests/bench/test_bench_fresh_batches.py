"""Smoke test of the fresh-batches benchmark on a tiny model: each variant in its own process, with
its own oneDNN cache capacity, its ratio to the default cache."""
import json

from bench import bench_fresh_batches
from lab.records.check import check_record
from spacy_elmo.training.memory import KEPT_KERNELS


def test_each_variant_runs_in_its_own_process_with_its_cache(tmp_path):
    out = tmp_path / "fresh.json"
    report = bench_fresh_batches.main(["--quick", "--json", str(out)])
    rows = {r["variant"]: r for r in report["rows"]}
    assert set(rows) == {"torch cells, default cache", "default cache", "kept kernels"}
    assert rows["default cache"]["x_default_median"] == 1.0 and rows["torch cells, default cache"]["x_torch_cells_median"] == 1.0
    assert rows["torch cells, default cache"]["torch_cells"] and not rows["default cache"]["torch_cells"]
    assert all(r["tokens_per_s_median"] > 0 and r["peak_rss_mb_max"] > 0 for r in rows.values())
    # each child read the capacity its variant names from its own environment
    assert [run["cache_capacity"] for run in report["runs"]["default cache"]] == ["1024"]
    assert [run["cache_capacity"] for run in report["runs"]["kept kernels"]] == [str(KEPT_KERNELS)]
    assert json.loads(out.read_text())["rows"] == report["rows"]
    assert "x default cache" in out.with_suffix(".md").read_text()
    assert check_record(report) == []


def test_a_full_run_reads_the_configs_shape_and_the_stretchs_batch_caps():
    from bench.bench_pretrain_step import model_shape

    config, samples, caps = model_shape(bench_fresh_batches.parse_args([]))
    assert caps == [(256, 6144)] and config.dim == 512 and samples > 0  # configs/bilm-small.cfg: en_small
