"""bench/batch_invariance.py: a sentence alone and in batches on fresh instances, per fp32 route."""
import json

from bench import batch_invariance
from spacy_elmo.fast import prepacked


def test_each_route_setting_is_measured_on_fresh_instances_and_stays_within_the_contract(tmp_path):
    out = tmp_path / "batch-invariance.json"
    batch_invariance.main(["--sentences", "5", "--batch-size", "4", "--json", str(out)])
    record = json.loads(out.read_text())
    assert set(record["routes"]) == {"as chosen", "onednn", "torch"} and record["sentences"]["count"] == 5
    for name, setting in record["routes"].items():
        assert 0 <= setting["bitwise_equal"] <= 5 and 0 <= setting["max_abs_difference"] < 1e-5, name
    # each setting ran the routes it names (bitwise equality is tests/fast/test_prepacked.py's to hold)
    assert record["routes"]["onednn"]["routes"] == {"one_sentence": prepacked.ONEDNN, "batch": prepacked.ONEDNN}
    assert record["routes"]["torch"]["routes"] == {"one_sentence": prepacked.TORCH, "batch": prepacked.TORCH}
