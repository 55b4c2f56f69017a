"""The frequent-word run: a word used many times through `neighbors`, each corpus in its own interpreter
with its own peak memory, judged by the uses it saw and kept."""
import json

from lab.reliability.frequent_word import USES_A_LINE, main, write_corpora

from ...conftest import DATA


def test_the_corpora_hold_the_asked_uses_one_on_a_single_line(tmp_path):
    corpora = write_corpora(tmp_path, repeats=1_000, uses=2 * USES_A_LINE + 7)
    line = corpora["one-line"].read_text(encoding="utf-8")
    assert "\n" not in line and line.split().count("bank") == 1_000
    many = corpora["many-uses"].read_text(encoding="utf-8").splitlines()
    assert len(many) == 3 and sum(l.split().count("bank") for l in many) == 2 * USES_A_LINE + 7


def test_each_case_records_every_use_seen_and_at_most_top_kept_with_its_own_peak(tmp_path):
    output = tmp_path / "frequent-word.json"
    code = main(["--model", str(DATA / "allennlp" / "tiny"), "--repeats", "600", "--uses", "450", "--output", str(output)])
    record = json.loads(output.read_text(encoding="utf-8"), parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
    one, many = record["cases"]["one-line"], record["cases"]["many-uses"]
    assert code == 0 and record["passed"]
    assert one["uses_seen"] == 600 and many["uses_seen"] == 450 and one["uses_kept"] == many["uses_kept"] == 5
    assert one["outcome"] == "ran" and 50 < one["peak_mb"] < 1024 and "TMP/one-line.txt" in one["command"]
    assert record["provenance"]["model"]["weights_sha256"] and record["provenance"]["data"] == {}
    from lab.records.check import check_record

    # the test's model is a path on this machine; the lab run's (the shipped biLM) is named
    assert [p for p in check_record(record) if not p.startswith("cases.")] == []
