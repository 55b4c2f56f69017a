"""Every results file names what made it: each JSON under results/ and bench/results/ holds the record
of spacy_elmo.provenance (command, start commit and cleanliness, model and weights, data checksums,
machine, date) at its top level, and no machine path (results/README.md)."""
import json
from pathlib import Path

import pytest

from lab.records.check import check_record, machine_paths

ROOT = Path(__file__).resolve().parents[3]
FILES = sorted(p for folder in ("results", "bench/results") for p in (ROOT / folder).rglob("*.json"))


def is_model_config(data) -> bool:
    """A copy of a model directory's config.json (scripts/campaign.sh results keeps model-best's): it
    describes a model, with its weights' SHA-256, not a run."""
    return isinstance(data, dict) and data.get("format") == "spacy-elmo.bilm"


def test_there_are_results_to_check():
    assert len(FILES) > 50


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_a_results_file_names_what_made_it(path):
    data = json.loads(path.read_text(encoding="utf-8"))
    where = path.relative_to(ROOT).as_posix()
    if is_model_config(data):
        assert len(str(data.get("weights_sha256", ""))) == 64, f"{where}: a model config without weights_sha256"
        assert not machine_paths(data), f"{where}: machine paths {machine_paths(data)}"
        return
    problems = check_record(data)
    assert not problems, f"{where}:\n  " + "\n  ".join(problems)
