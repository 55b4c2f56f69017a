import json

import pytest

from lab.campaign import precision_compare


def _run(folder, final, *, steps=300, loss=4.2, before=120.0):
    folder.mkdir(parents=True)
    lines = [{"kind": "train", "step": s, "loss": loss, "train_ppl": 66.0, "tokens_per_s": 1000.0 + s} for s in (10, 20)]
    lines += [{"kind": "eval", "step": 150, "dev_ppl": (before + final) / 2}, {"kind": "eval", "step": steps, "dev_ppl": final}]
    (folder / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    report = {"steps": steps, "tokens": 1_000_000, "seconds": 600.0, "before": {"ppl": before}}
    (folder / "finetune-report.json").write_text(json.dumps(report), encoding="utf-8")
    return folder


@pytest.mark.parametrize("bf16_final, choice", [(100.9, "bf16"), (99.0, "bf16"), (101.2, "fp32")])
def test_bf16_is_chosen_only_within_one_percent_of_fp32s_final_perplexity(tmp_path, bf16_final, choice):
    fp32, bf16 = _run(tmp_path / "fp32", 100.0), _run(tmp_path / "bf16", bf16_final, loss=4.25)
    out = tmp_path / "compare.json"
    record = precision_compare.main(["--fp32", str(fp32), "--bf16", str(bf16), "--json", str(out),
                                     "--plot", str(tmp_path / "c.png")])
    assert json.loads(out.read_text(encoding="utf-8")) == json.loads(json.dumps(record))
    assert record["choice"] == choice and record["bf16_safe"] == (choice == "bf16")
    assert record["final_ratio"] == round(bf16_final / 100.0, 5)
    assert [p["step"] for p in record["points"]] == [0, 150, 300]
    assert record["max_train_loss_gap"] == pytest.approx(0.05) and record["train_loss_steps_compared"] == 2
    assert record["runs"]["fp32"]["tokens_per_s_median"] == 1015.0
    assert (tmp_path / "c.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_runs_of_different_lengths_are_refused(tmp_path):
    fp32, bf16 = _run(tmp_path / "fp32", 100.0), _run(tmp_path / "bf16", 100.0, steps=400)
    with pytest.raises(SystemExit, match="different steps"):
        precision_compare.main(["--fp32", str(fp32), "--bf16", str(bf16), "--json", str(tmp_path / "c.json")])
