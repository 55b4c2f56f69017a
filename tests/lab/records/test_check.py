from lab.records.check import SCHEMA_DATE, check_record


def complete_record(**changes):
    record = {
        "command": "python scripts/x.py", "start_commit": "a" * 40, "start_clean": True, "started": "2026-12-02T07:00:00+00:00",
        "model": {"name": "en_small", "version": "0.6.0", "weights": "spacy_elmo/models/en_small/model.safetensors",
                  "weights_sha256": "b" * 64},
        "data": {"assets/datasets/wic/train/train.data.txt": "c" * 64},
        "cpu": "x", "cpu_flags": [], "cpu_capability": "AVX2", "cpu_count": 2, "torch_threads": 2, "python": "3.11",
        "torch": "2", "spacy_elmo": "0.6.0", "date": "2026-12-02T07:01:00+00:00",
    }
    record.update(changes)
    return {"provenance": record}


def test_check_record_names_what_is_missing_null_or_unexplained():
    assert check_record(complete_record()) == []
    assert check_record({"score": 1}) == ["provenance: missing (the record belongs at the top level)"]
    lacking = complete_record()
    del lacking["provenance"]["data"]
    assert check_record(lacking) == ["provenance.data: missing"]
    assert check_record(complete_record(model=None)) == ["provenance.model: null without a model_note saying why"]
    assert check_record(complete_record(model=None, model_note="random weights")) == []
    assert check_record(complete_record(data={})) == ["provenance.data: empty without a data_note saying why"]
    assert check_record(complete_record(data={}, data_note="generated texts")) == []
    assert check_record(complete_record(model=[complete_record()["provenance"]["model"], {"name": "x"}])) == [
        "provenance.model[1].version: missing", "provenance.model[1].weights: missing", "provenance.model[1].weights_sha256: missing",
    ]
    # a null: only in a record from before the schema, and only explained
    assert check_record(complete_record(start_commit=None)) == [
        f"provenance.start_commit: null (a record dated from {SCHEMA_DATE} on has every value)"
    ]
    old = {"date": "2026-12-01T10:00:00+00:00"}
    assert check_record(complete_record(start_commit=None, **old)) == [
        "provenance.start_commit: null, and provenance.unknown does not say why"
    ]
    assert check_record(complete_record(start_commit=None, unknown={"start_commit": "not recorded then"}, **old)) == []
    assert check_record(complete_record(unknown={"start_commit": "not recorded then"})) == [
        f"provenance.unknown: only a record written before {SCHEMA_DATE} may leave fields unknown",
        "provenance.unknown.start_commit: the field has a value",
    ]
    undated = complete_record(date=None, written_before="2026-11-30T10:00:00+00:00", unknown={"date": "not recorded then"})
    assert check_record(undated) == []


def test_check_record_refuses_machine_paths_anywhere_in_the_file():
    for path in ("/root/.cache/x.so", "../shared/datasets/wic/x.txt", "~/data/x", "C:\\data\\x", ".../tmp/prof/x.txt", "...///tmp/x.json",
                 ".../work/run/x.json"):
        found = check_record({**complete_record(), "corpus": f"--corpus {path}"})
        assert found == [f"corpus: a machine path ({'--corpus ' + path!r:.120})"], path
    assert check_record({**complete_record(), "corpus": ".../runs/model-best", "rate": "tokens/s"}) == []


def test_a_run_from_a_dirty_tree_says_why():
    expected = ["provenance.dirty_note: missing (the run's tree had uncommitted changes: say what they were "
                "and why the numbers stand)"]
    assert check_record(complete_record(start_clean=False)) == expected
    assert check_record(complete_record(start_clean=False, dirty_note="only a comment of the script differed")) == []
    # where the start was not recorded, the tree when the file was written stands in for it
    old = {"date": "2026-12-01T10:00:00+00:00", "unknown": {"start_clean": "not recorded then"}}
    assert check_record(complete_record(start_clean=None, dirty=True, **old)) == expected
    assert check_record(complete_record(start_clean=True, dirty=True)) == []
