"""Every measured number of a bound document names the field of the record it reports and equals it
at the precision written (lab/records/binding.py); a changed or swapped number is found."""
import json
import random
import re
from pathlib import Path

import pytest

from lab.records.binding import BOUND, NOT_CONVERTED, check_all, check_text, decimal_spans, written_numbers
from lab.records.citations import check_all as check_citing_blocks
from lab.records.citations import documents

ROOT = Path(__file__).resolve().parents[3]
SHA = "a" * 64


@pytest.fixture
def checkout(tmp_path):
    provenance = {"start_clean": True, "dirty": False,
                  "model": {"name": "en_small", "version": "0.9.0", "weights": "model.safetensors", "weights_sha256": SHA}}
    (tmp_path / "results").mkdir()
    record = {"ppl": 114.24714980706285, "accuracy": 0.9162, "seconds": 763.1, "oov": 0.081,
              "tasks": [{"scores": {"layer 0": 86.59, "layer 1": 91.63}}], "provenance": provenance}
    (tmp_path / "results" / "eval.json").write_text(json.dumps(record), encoding="utf-8")
    lines = [{"kind": "dev", "step": 300, "dev_ppl": 420.51}, {"kind": "dev", "step": 600, "dev_ppl": 249.93}]
    (tmp_path / "results" / "pretrain").mkdir()
    (tmp_path / "results" / "pretrain" / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    (tmp_path / "results" / "pretrain" / "report.json").write_text(json.dumps({"provenance": provenance}), encoding="utf-8")
    return tmp_path


def problems_of(checkout, text):
    return check_text("<!-- record e: results/eval.json -->\n<!-- record m: results/pretrain/metrics.jsonl -->\n" + text,
                      "page.md", root=checkout)[0]


def test_a_number_bound_to_its_field_passes_at_the_precision_written(checkout):
    text = ("Perplexity 114.2<!-- e#/ppl --> and 114.25<!-- e#/ppl -->, accuracy 91.6<!-- e#/accuracy *100 -->%, "
            "12.7<!-- e#/seconds /60 --> minutes, layer 1 91.63<!-- e#/tasks/0/scores/layer 1 -->, "
            "dev 249.9<!-- m#L2/dev_ppl -->, a lead of +5.0<!-- e = tasks[0].scores[\"layer 1\"] - tasks[0].scores[\"layer 0\"] -->.\n")
    assert problems_of(checkout, text) == []
    assert check_text("114.2<!-- results/eval.json#/ppl -->\n", "page.md", root=checkout) == ([], 1)


def test_a_number_is_held_to_its_own_field_alone(checkout):
    # 91.6 is in the record (accuracy as percent) but not in the field this number names
    assert problems_of(checkout, "Perplexity 91.6<!-- e#/ppl -->.\n") == ["page.md:3: 91.6 is not e#/ppl (114.247)"]
    assert problems_of(checkout, "Perplexity 114.3<!-- e#/ppl -->.\n")  # a rounding the field does not give
    assert problems_of(checkout, "Accuracy 0.92<!-- e#/accuracy *100 -->.\n")  # the scale is the one written
    assert problems_of(checkout, "A lead of -5.0<!-- e = tasks[0].scores[\"layer 1\"] - tasks[0].scores[\"layer 0\"] -->.\n")


def test_an_unbound_measurement_fails_and_settings_sources_and_small_integers_do_not(checkout):
    assert problems_of(checkout, "Perplexity 114.2 on the test text.\n") == [
        "page.md:3: 114.2 names no record field (NUMBER<!-- NAME#POINTER -->, or <!-- setting -->)"]
    text = ("lr 0.002<!-- setting -->, the paper 57.7<!-- source: Pilehvar and Camacho-Collados 2019 -->, "
            "2 cores, 1,000 steps, layer 1, en_small 0.9.0, CC BY-SA 4.0, ISO 639, within 1e-5, `1.23`, target >= 95.5.\n")
    assert problems_of(checkout, text) == []


def test_a_range_upper_end_and_a_signed_number_are_numbers():
    assert [(n.text, n.value) for n in written_numbers("4.87-7.68x, -0.60 and +8.29")] == [
        ("4.87", 4.87), ("7.68x", 7.68), ("-0.60", -0.6), ("+8.29", 8.29)]
    # a range whose lower end is bound: the hyphen after the comment is no minus sign
    assert [(n.text, n.value) for n in written_numbers("0.92<!-- a#/x -->-1.11")] == [("0.92", 0.92), ("1.11", 1.11)]


def test_a_missing_field_line_or_record_is_named(checkout):
    assert problems_of(checkout, "1.0<!-- e#/nope -->\n") == ["page.md:3: 1.0: results/eval.json: no field /nope (at 'nope')"]
    assert problems_of(checkout, "1.0<!-- m#L9/dev_ppl -->\n") == ["page.md:3: 1.0: results/pretrain/metrics.jsonl: no line 9"]
    assert problems_of(checkout, "1.0<!-- results/none.json#/x -->\n") == ["page.md:3: 1.0: results/none.json: no such record"]


def test_a_bound_record_from_a_dirty_tree_needs_its_note_and_json_lines_stand_by_their_neighbours(checkout):
    report = checkout / "results" / "pretrain" / "report.json"
    report.write_text(json.dumps({"provenance": {"start_clean": False, "dirty": True, "model": None, "model_note": "x"}}))
    assert "dirty_note" in " ".join(problems_of(checkout, "dev 249.9<!-- m#L2/dev_ppl -->\n"))
    report.unlink()
    assert problems_of(checkout, "dev 249.9<!-- m#L2/dev_ppl -->\n") == [
        "page.md: results/pretrain/metrics.jsonl: no JSON record with a provenance beside it"]


def test_every_document_is_bound_or_listed_as_not_converted():
    listed = set(BOUND) | set(NOT_CONVERTED)
    assert {p.relative_to(ROOT).as_posix() for p in documents(ROOT)} == listed
    assert not set(BOUND) & set(NOT_CONVERTED)


def test_the_bound_documents_name_the_field_of_every_measured_number():
    counts, problems = check_all(ROOT)
    assert not problems, "\n".join(problems)
    assert set(counts) == set(BOUND)
    assert counts["README.md"] > 0 and counts["spacy_elmo/models/en_small/MODEL_CARD.md"] > 0, counts


def test_the_documents_not_yet_converted_still_cite_numbers_their_records_hold():
    count, problems = check_citing_blocks(ROOT, NOT_CONVERTED)
    assert count == len(NOT_CONVERTED)
    assert not problems, "\n".join(problems)


def mutated(text: str, rng: random.Random, swap: bool) -> str:
    """``text`` with one decimal number changed to another of the same rounding, or two swapped."""
    spans = decimal_spans(text)
    if swap:
        for _ in range(100):
            a, b = sorted(rng.sample(spans, 2))
            if text[a[0]:a[1]] != text[b[0]:b[1]]:
                return text[:a[0]] + text[b[0]:b[1]] + text[a[1]:b[0]] + text[a[0]:a[1]] + text[b[1]:]
        raise AssertionError("no two different numbers to swap")
    start, end = rng.choice(spans)
    written = text[start:end]
    decimals = len(written.split(".")[1])
    value = float(written.replace(",", "")) + rng.choice([-3, -2, -1, 1, 2, 3]) * 10 ** -decimals
    new = f"{abs(value):{',' if ',' in written else ''}.{decimals}f}"
    return text[:start] + (new if new != written else f"{float(new.replace(',', '')) + 10 ** -decimals:.{decimals}f}") + text[end:]


def mutation_rate(seed: int, draws: int) -> float:
    """The share of seeded draws (half changes, half swaps) of the bound documents' decimal numbers
    that the binding check finds."""
    rng = random.Random(seed)
    texts = {name: (ROOT / name).read_text(encoding="utf-8") for name in BOUND}
    weights = [len(decimal_spans(text)) for text in texts.values()]
    found = 0
    for draw in range(draws):
        name = rng.choices(list(texts), weights)[0]
        problems, _ = check_text(mutated(texts[name], rng, swap=draw % 2 == 1), name, root=ROOT)
        found += bool(problems)
    return found / draws


def test_a_changed_or_swapped_decimal_number_is_found_in_at_least_95_percent_of_draws():
    rate = mutation_rate(seed=0, draws=200)
    print(f"mutation rate: {rate:.3f} of 200 draws")
    assert rate >= 0.95


def test_a_record_whose_dirty_note_does_not_say_what_differed_backs_no_number(checkout):
    record = json.loads((checkout / "results" / "eval.json").read_text(encoding="utf-8"))
    record["provenance"].update(start_clean=False, dirty=True,
                                dirty_note="some tracked files differed from the commit, not which")
    (checkout / "results" / "eval.json").write_text(json.dumps(record), encoding="utf-8")
    assert problems_of(checkout, "Perplexity 114.2<!-- e#/ppl -->.\n") == [
        "page.md: results/eval.json: run from a tree with uncommitted changes, and its dirty_note does not say what differed"]
    record["provenance"]["dirty_note"] = "only docs/speed.md differed (text); the measured code was as committed"
    (checkout / "results" / "eval.json").write_text(json.dumps(record), encoding="utf-8")
    assert problems_of(checkout, "Perplexity 114.2<!-- e#/ppl -->.\n") == []


def test_a_report_block_is_written_from_the_record_it_names(tmp_path):
    from lab.records.doc_tables import report_table
    from lab.records.numbers import render
    path = "results/en_small/0.9.0/textcat-metrics.json"
    text = f"<!-- numbers:report:{path} -->\n<!-- /numbers:report -->\n"
    written = render(text, ROOT)
    assert report_table(ROOT, path) in written
    runs = json.loads((ROOT / path).read_text(encoding="utf-8"))["runs"]
    gain = 100 * (runs[0]["score"] - runs[1]["score"])
    assert f"| {gain:+.2f} |" in written
    assert check_text(written, "page.md", root=ROOT)[0] == []
    assert check_text(written.replace(f"{gain:+.2f}", f"{gain + 1:+.2f}"), "page.md", root=ROOT)[0]
