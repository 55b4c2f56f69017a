"""The older check, which the documents not yet bound to their fields are held to (``NOT_CONVERTED`` of
lab/records/binding.py): every number a block cites beside a record appears in that record, and the record stands behind it: a clean run (or a ``dirty_note`` saying why not) naming the
model and its weights' SHA-256 (lab/records/citations.py)."""
import json
import subprocess
from pathlib import Path

import pytest

from lab.records.citations import Number, Record, appears, blocks, check_document, numbers, record_state
from lab.records.derivation import derive

ROOT = Path(__file__).resolve().parents[3]
SHA = "a" * 64


def write_record(path: Path, values: dict, **provenance) -> Path:
    record = {"start_clean": True, "dirty": False,
              "model": {"name": "en_small", "version": "0.7.0", "weights": "model.safetensors", "weights_sha256": SHA}}
    record.update(provenance)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({**values, "provenance": record}), encoding="utf-8")
    return path


@pytest.fixture
def checkout(tmp_path):
    write_record(tmp_path / "results" / "eval.json", {"ppl": 114.24714980706285, "accuracy": 0.9162, "seconds": 763.1})
    (tmp_path / "docs").mkdir()
    return tmp_path


def problems_of(checkout: Path, text: str, name: str = "docs/page.md") -> list:
    doc = checkout / name
    doc.write_text(text, encoding="utf-8")
    return check_document(doc, root=checkout)


def test_numbers_in_their_record_pass_at_the_precision_written(checkout):
    text = "Perplexity 114.2 and 114.25, accuracy 91.6 (a fraction as percent), 12.7 minutes ([eval](../results/eval.json)).\n"
    assert problems_of(checkout, text) == []


def test_a_number_missing_from_the_cited_record_fails_naming_file_line_and_record(checkout):
    problems = problems_of(checkout, "Intro.\n\nPerplexity 122.5 ([eval](../results/eval.json)).\n")
    assert problems == ["docs/page.md:3: 122.5 is in none of its records (results/eval.json)"]


def test_a_rounding_the_record_does_not_allow_fails(checkout):
    assert problems_of(checkout, "Perplexity 114.3 (`results/eval.json`).\n")


def test_blocks_citing_no_record_and_fenced_code_are_not_held(checkout):
    text = "ELMo saw 769M tokens.\n\n```bash\nrun --steps 12345 results/eval.json\n```\n"
    assert problems_of(checkout, text) == []


def test_each_list_item_and_table_row_is_its_own_block(checkout):
    text = ("- perplexity 114.2: [eval](../results/eval.json)\n- 769M tokens of another corpus\n\n"
            "| what | figure | record |\n|---|---|---|\n| ppl | 114.2 | [eval](../results/eval.json) |\n| other | 555.5 | none |\n")
    assert problems_of(checkout, text) == []
    found = list(blocks(checkout / "docs" / "page.md", root=checkout))
    assert [b.line for b in found] == [1, 2, 4, 6, 7]


def test_versions_identifiers_code_and_small_integers_are_not_numbers():
    text = "en_small 0.7.0 on WikiText-2 and CoNLL-2003, fp32, `2x4096_512` over 2 cores, 2026-12-02, layer 1."
    assert numbers(text) == []
    found = [n.text for n in numbers("1,217 tokens/s, 2.46x, 0.16%, 50M tokens, 1.9e-6, +7.73, 1,000 steps and 250 lines")]
    assert found == ["1,217", "2.46x", "0.16%", "50M", "1.9e-6", "+7.73", "250"]


def test_a_number_appears_within_half_its_last_digit():
    assert appears(Number("114.2", 114.2, 0.05), [114.24])
    assert not appears(Number("114.2", 114.2, 0.05), [114.26])
    assert appears(Number("50M", 50e6, 0.5e6), [50.3e6])


def test_a_generated_block_is_left_to_its_generator(checkout):
    text = "<!-- numbers:headline -->\n| ppl | 999.9 | [eval](../results/eval.json) |\n<!-- /numbers:headline -->\n"
    assert problems_of(checkout, text) == []


def test_a_record_from_a_dirty_tree_needs_a_note_saying_why(checkout):
    write_record(checkout / "results" / "dirty.json", {"ppl": 5.5}, start_clean=False, dirty=True)
    assert "dirty_note" in " ".join(problems_of(checkout, "ppl 5.5 ([d](../results/dirty.json))\n"))
    write_record(checkout / "results" / "dirty.json", {"ppl": 5.5}, start_clean=False, dirty=True,
                 dirty_note="only the benchmark's own script differed; its measured code was committed")
    assert problems_of(checkout, "ppl 5.5 ([d](../results/dirty.json))\n") == []


def test_a_model_without_its_weights_sha256_or_a_reason_fails(checkout):
    model = {"name": "training/model-best", "version": None, "weights": None, "weights_sha256": None}
    write_record(checkout / "results" / "nosha.json", {"ppl": 5.5}, model=model)
    record = Record(checkout, "results/nosha.json")
    assert len(record_state(record)) == 2
    write_record(checkout / "results" / "nosha.json", {"ppl": 5.5}, model=model,
                 unknown={"model": "a training output that was not kept"})
    assert record_state(record) == []


def test_a_markdown_report_is_read_with_the_json_beside_it(checkout):
    write_record(checkout / "results" / "table-metrics.json", {"runs": [{"score": 0.8174}]}, start_clean=False, dirty=True)
    (checkout / "results" / "table.md").write_text("| upos | +7.73 |\n", encoding="utf-8")
    problems = problems_of(checkout, "UPOS +7.73 against 81.74 ([t](../results/table.md))\n")
    assert len(problems) == 1 and "dirty_note" in problems[0]


def test_no_report_prints_an_unfilled_project_variable():
    unfilled = [p.relative_to(ROOT).as_posix() for p in (ROOT / "results").rglob("*.md") if "${" in p.read_text(encoding="utf-8")]
    assert not unfilled


def test_a_record_as_committed_is_read_from_git(checkout):
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    subprocess.run(["git", "init", "-q"], cwd=checkout, check=True)
    subprocess.run(git + ["add", "results"], cwd=checkout, check=True)
    subprocess.run(git + ["commit", "-q", "-m", "records"], cwd=checkout, check=True)
    commit = subprocess.run(["git", "rev-parse", "--short=8", "HEAD"], cwd=checkout, capture_output=True, text=True).stdout.strip()
    write_record(checkout / "results" / "eval.json", {"ppl": 99.0})
    assert problems_of(checkout, f"Earlier 114.2 (`{commit}:results/eval.json`), now 99.0 (`results/eval.json`).\n") == []
    assert problems_of(checkout, f"Earlier 114.2 (`{commit}:results/eval.json`).\n") == []
    assert problems_of(checkout, "Earlier 114.2 (`results/eval.json`).\n")


def test_a_derived_number_is_computed_from_its_record(checkout):
    assert problems_of(checkout, "12.7<!-- = seconds / 60 --> minutes (`results/eval.json`).\n") == []
    assert problems_of(checkout, "5.1<!-- = ppl - 109.1 --> points (`results/eval.json`).\n") == []
    problems = problems_of(checkout, "13.7<!-- = seconds / 60 --> minutes (`results/eval.json`).\n")
    assert problems == ["docs/page.md:1: 13.7 is not seconds / 60 in its records (results/eval.json)"]
    assert problems_of(checkout, "1.0<!-- = missing / 60 --> (`results/eval.json`).\n")
    assert derive("__import__('os')", {}) is None
    assert derive("sum(removed) / 2", {"removed": {"EWT dev": 71, "WiC": 285}}) == 178.0


def test_fields_by_key_quoted_sources_and_bounds(checkout):
    write_record(checkout / "results" / "probe.json", {"tasks": [{"scores": {"layer 0": 86.59, "layer 1": 91.63}}]})
    text = ('LSTM 1 leads by 5.0<!-- = tasks[0].scores["layer 1"] - tasks[0].scores["layer 0"] --> points, '
            "the paper 57.7<!-- source: Pilehvar and Camacho-Collados 2019 -->, within 1e-5, target >= 95.5 (`results/probe.json`).\n")
    assert problems_of(checkout, text) == []
    assert problems_of(checkout, "The paper says 57.7 (`results/probe.json`).\n")
