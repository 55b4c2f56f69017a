"""The precision windows on a tiny biLM: every window runs real finetune steps, rounds alternate their
order, both precisions see the same batches, and the record passes the results check."""
import json

from bench import precision_windows
from lab.records.check import check_record
from spacy_elmo.training.pretrain import pretrain

from ..training.conftest import TINY_CFG, tiny_config, write_corpus


def test_windows_interleave_and_record_speed_and_dev_perplexity(tmp_path, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    train, dev = write_corpus(tmp_path / "train.txt", 300, seed=1), write_corpus(tmp_path / "dev.txt", 40, seed=2)
    pretrain(tiny_config(train, dev, training__max_steps=20), tmp_path / "pre")
    out = tmp_path / "record" / "windows.json"
    assert precision_windows.main([
        "--model", str(tmp_path / "pre" / "model-best"), "--train", str(train), "--dev", str(dev),
        "--config", str(TINY_CFG), "--steps", "10", "--rounds", "2", "--work", str(tmp_path / "work"), "--json", str(out),
    ]) == 0
    record = json.loads(out.read_text(encoding="utf-8"))
    order = [(w["round"], w["precision"]) for w in record["windows"]]
    assert order == [(0, "fp32"), (0, "bf16"), (1, "bf16"), (1, "fp32")]
    assert all(w["steps"] == 10 and w["tokens_per_s_median"] > 0 for w in record["windows"])
    assert len({w["tokens"] for w in record["windows"]}) == 1  # the same batches at either precision
    assert all(w["dev_ppl_after"] < w["dev_ppl_before"] for w in record["windows"])
    assert record["summary"]["fp32"]["x_fp32_by_round"] == [1.0, 1.0]
    assert len(record["summary"]["bf16"]["x_fp32_by_round"]) == 2
    assert check_record(record) == [] and len(record["provenance"]["data"]) == 2
    assert "| 1 | bf16 |" in out.with_suffix(".md").read_text(encoding="utf-8")
