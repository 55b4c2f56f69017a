"""Smoke test of the domain fine-tuning benchmark on a Reuters-shaped folder of a few stories: two
steps from the shipped biLM, the record complete and its before/after figures consistent."""
import json

import pytest

from bench import bench_finetune_domain
from lab.records.check import check_record

STORY = ("COCOA REVIEW\n  Showers continued throughout the week in\n  the Bahia cocoa zone, said the mln dlrs\n"
         "  review. Arrivals for the week\n  ended February 22 were 155,221 bags of mln dlrs.\n")


@pytest.mark.slow
def test_the_benchmark_records_before_and_after_on_the_domain_and_the_general_text(tmp_path):
    domain = tmp_path / "reuters"
    domain.mkdir()
    (domain / bench_finetune_domain.TRAIN_NAME).write_text((STORY + "\n") * 30, encoding="utf-8")
    (domain / bench_finetune_domain.TEST_NAME).write_text((STORY + "\n") * 6, encoding="utf-8")
    out = tmp_path / "record.json"
    record = bench_finetune_domain.main([
        "--domain", str(domain), "--json", str(out), "--max-steps", "2", "--threads", "1", "--dev-stories", "2",
        "--test-from", "3", "--test-segments", "4", "--general-segments", "5", "--work", str(tmp_path / "work"),
        "--set", "finetune.general=null", "--set", "finetune.add_words=3", "--set", "training.max_batch_tokens=256",
        "--dirty-note", "a test",
    ])
    assert json.loads(out.read_text()) == record
    assert record["steps"] == 2 and record["tokens"] > 0 and record["stopped_by"] == "max_steps"
    assert "spaCy's 'en' tokenizer" in record["tokenizer"]["train"] and "wrapped lines" in record["tokenizer"]["train"]
    assert {"mln", "dlrs"} <= set(record["vocabulary"]["first_words"])  # newswire's words, new to the shipped vocabulary
    before, after = record["before"], record["after"]
    assert before["domain_test"]["oov_rate"] > after["domain_test"]["oov_rate"]
    assert before["domain_test"]["tokens_shared"] == after["domain_test"]["tokens_shared"]
    assert record["general_ratio"] == round(after["general"]["ppl_shared"] / before["general"]["ppl_shared"], 4)
    assert set(record["met"]) == {"general_ratio", "domain_fall", "domain_oov"}
    assert check_record(record) == []
    assert "| Reuters test (held out) |" in out.with_suffix(".md").read_text()
