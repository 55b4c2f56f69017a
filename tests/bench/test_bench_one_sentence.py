"""Smoke test of the one-sentence benchmark on a tiny shape: every precision timed round by round against
fp32, its bytes and share of the memory's limit, its cosines on the shipped model's weights, written."""
import json

from bench import bench_one_sentence
from lab.records.check import check_record


def test_every_precision_is_timed_against_fp32_and_against_the_limit_and_written(tmp_path):
    out, md = tmp_path / "one-sentence.json", tmp_path / "one-sentence.md"
    report = bench_one_sentence.main(["--quick", "--test-data", "sample/ewt/test.conllu", "--load", "a test run",
                                      "--json", str(out), "--markdown", str(md)])
    assert json.loads(out.read_text())["modes"].keys() == report["modes"].keys() == set(bench_one_sentence.MODES)
    rounds = report["rounds"]
    assert rounds == 2 and len(report["load_average_per_round"]) == rounds and report["note"].startswith("a test run")
    limits = report["limits"]
    assert limits["timesteps"] == report["tokens"] + 2 * report["sentences"]["count"]  # + <S>, </S> per sentence
    assert limits["triad_gb_per_s_median"] > 0 and limits["torch_fp32_matvec_gb_per_s"] > 0
    modes = report["modes"]
    fp32 = modes["fp32"]
    assert fp32["x_fp32_per_round"] == [1.0] * rounds and fp32["cosine_to_fp32_min"] > 0.999999
    for name, stats in modes.items():
        assert len(stats["round_seconds"]) == rounds and stats["tokens_per_s"] > 0
        # bytes per timestep: 4, 2 or 1 a weight; the share of the limit is the floor's time over the run's
        assert stats["weight_bytes_per_step"] * bench_one_sentence.BYTES["fp32"] == (
            fp32["weight_bytes_per_step"] * bench_one_sentence.BYTES[bench_one_sentence.MODES[name]])
        floor = stats["weight_bytes_per_step"] * limits["timesteps"] / (limits["triad_gb_per_s_median"] * 1e9)
        assert abs(stats["fraction_of_memory_limit"] - floor / stats["seconds"]) < 1e-9
        assert stats["cosine_to_fp32_min"] > 0.999  # random weights of the tiny shape
    accuracy = report["accuracy"]
    assert accuracy["model"] == "en_small" and set(accuracy["modes"]) == {"fp32", "bf16", "int8"}
    assert accuracy["modes"]["int8"]["cosine_to_fp32_mean"] > 0.999
    # a sentence alone and in a batch: the same vectors, int8 included (its ranges are per row)
    assert all(a["max_abs_change_alone_vs_batch"] < 1e-5 for a in accuracy["modes"].values())
    assert report["step_products"] and all(t["best_us"] > 0 for t in report["step_products"].values())
    assert "| int8 |" in md.read_text() and "en_small's real weights" in md.read_text()
    assert [p for p in check_record(report) if not p.startswith("provenance.dirty_note")] == []
    assert report["provenance"]["model"][0]["name"] == "en_small"
