"""Smoke test of the pretraining-step benchmark on a tiny model: every setting measured, ratios to fp32."""
import json
from collections import Counter

from bench import bench_pretrain_step
from bench.workloads import first_batch
from lab.records.check import check_record
from spacy_elmo.training.vocab import Vocab


def test_every_setting_measured_with_its_ratio_to_fp32(tmp_path):
    out = tmp_path / "step.json"
    report = bench_pretrain_step.main(["--quick", "--rounds", "2", "--threads", "1,2", "--loops", "steps,ops", "--steps", "2", "--json", str(out)])
    rows = {(r["precision"], r["threads"], r["loop"]): r for r in report["rows"]}
    assert set(rows) == {(p, t, loop) for p in ("fp32", "bf16") for t in (1, 2) for loop in ("steps", "ops")}
    assert all(r["tokens_per_s_median"] > 0 and r["batch_tokens"] > 0 and r["batches"] == 2 for r in rows.values())
    assert rows[("fp32", 2, "steps")]["x_fp32_median"] == 1.0 and rows[("bf16", 2, "steps")]["x_fp32_median"] > 0
    assert rows[("fp32", 1, "ops")]["x_ops_median"] == 1.0 and rows[("fp32", 1, "steps")]["x_ops_median"] > 0
    assert json.loads(out.read_text())["rows"] == report["rows"]
    assert "x fp32" in out.with_suffix(".md").read_text() and report["machine"]["cpu_flags"] is not None
    assert check_record(report) == [] and report["provenance"]["data"] == {}


def test_a_published_shape_is_timed_in_place_of_the_configs(tmp_path):
    report = bench_pretrain_step.main(["--quick", "--shape", "tiny", "--rounds", "1", "--steps", "1", "--precisions", "fp32"])
    assert report["config"]["lstm"]["dim"] == 32 and report["provenance"]["model_note"].endswith("published shape tiny")
    full = bench_pretrain_step.parse_args(["--shape", "full"])
    assert bench_pretrain_step.model_shape(full)[0].dim == 4096  # the config still gives the softmax's samples


def test_first_batch_stops_at_either_cap():
    sentences = [["a"] * 3, ["b"] * 4, ["c"] * 5]
    assert first_batch(sentences, 10, 7) == sentences[:2]
    assert first_batch(sentences, 1, 100) == sentences[:1]


def test_training_batches_are_the_training_planners_length_buckets():
    sentences = [["w"] * n for n in (3, 30, 4, 31, 5, 29, 6, 32)]
    vocab = Vocab.from_counts(Counter({"w": 5}), size=10, min_count=1)
    batches = bench_pretrain_step.training_batches(sentences, vocab, (4, 1000), 3, 50)
    assert len(batches) == 3
    for batch in batches:  # similar lengths together: never a short sentence beside a long one
        assert max(batch.lengths) - min(batch.lengths) < 20
