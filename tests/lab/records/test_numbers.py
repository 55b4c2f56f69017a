"""The README's generated numbers are what their records give (lab/records/numbers.py)."""
import re
import shutil
from pathlib import Path

import pytest

from lab.records.numbers import HEADLINES, main, render

ROOT = Path(__file__).resolve().parents[3]


def test_the_readme_matches_its_records():
    assert main(["--check"]) == 0


def test_every_headline_row_links_a_record_that_exists_and_names_its_model():
    for row in HEADLINES:
        assert (ROOT / row.record).is_file(), row.record
    table = render("<!-- numbers:headline -->\n<!-- /numbers:headline -->\n", ROOT)
    # a row names the shipped release its record's weights are, or says what stood in for a model
    assert all(re.search(r"en_small \d+\.\d+\.\d+ \(`[0-9a-f]{12}`\)|random weights|test model", line)
               for line in table.splitlines()[3:-1])


def test_a_hand_edited_number_is_found_and_rewritten(tmp_path, capsys):
    readme = tmp_path / "README.md"
    shutil.copy(ROOT / "README.md", readme)
    original = readme.read_text(encoding="utf-8")
    start = original.index("<!-- numbers:headline -->")
    figure = re.search(r"\| (\d+\.\d) \|", original[start:])
    edited = original[:start] + original[start:].replace(figure.group(0), "| 1.0 |", 1)
    readme.write_text(edited, encoding="utf-8")
    assert main(["--check", "--document", str(readme), "--root", str(ROOT)]) == 1
    assert "+ " in capsys.readouterr().err
    assert main(["--document", str(readme), "--root", str(ROOT)]) == 0
    assert readme.read_text(encoding="utf-8") == original


def test_an_unknown_block_is_refused_by_name(tmp_path):
    with pytest.raises(ValueError, match="numbers:nonesuch"):
        render("<!-- numbers:nonesuch -->\n<!-- /numbers:nonesuch -->\n", ROOT)


def test_a_document_without_blocks_is_an_error(tmp_path):
    doc = tmp_path / "page.md"
    doc.write_text("No generated numbers here.\n", encoding="utf-8")
    assert main(["--check", "--document", str(doc), "--root", str(ROOT)]) == 1


def test_every_speed_row_gives_its_median_round_and_what_the_run_needed():
    from lab.records.numbers import SPEED
    for row in SPEED:
        assert (ROOT / row.record).is_file(), row.record
    table = render("<!-- numbers:speed -->\n<!-- /numbers:speed -->\n", ROOT)
    rows = table.splitlines()[3:-1]
    assert len(rows) == len(SPEED)
    # one statistic: the median round (with the range where the record keeps every round), and the
    # instructions, loop, char cache, threads and load the run had
    assert all("median" in line and "thread" in line and "char cache" in line and "load" in line for line in rows)
    assert all(re.search(r"AVX|AMX", line) for line in rows)
