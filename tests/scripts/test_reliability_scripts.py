"""The long reliability runs (scripts/soak.py, scripts/fuzz_long.py) use spacy_elmo.reliability,
as the tests do, and run without the test tree on the path."""
import json
import re
import subprocess
import sys

import pytest

from ..conftest import TINY
from ..training_runs import ROOT


def test_scripts_and_benchmarks_import_nothing_from_the_tests():
    for path in sorted([*(ROOT / "scripts").glob("*.py"), *(ROOT / "bench").glob("*.py")]):
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"^\s*(from|import)\s+tests\b", text, re.MULTILINE), path.name
        assert "sys.path.insert" not in text, path.name


def _run(script, *args, cwd):
    # -I: no PYTHONPATH, no script folder on sys.path; from an empty folder, so `tests` is not importable
    command = [sys.executable, "-I", str(ROOT / "scripts" / script), *map(str, args)]
    return subprocess.run(command, capture_output=True, text=True, cwd=cwd, env={"OMP_NUM_THREADS": "1"})


@pytest.mark.slow
def test_soak_and_fuzz_scripts_run_outside_the_checkout(tmp_path):
    soak = _run("soak.py", "--docs", 60, "--sample-every", 20, "--max-growth", 1000, "--bilm", TINY, cwd=tmp_path)
    assert soak.returncode == 0, soak.stderr
    assert json.loads(soak.stdout.strip().splitlines()[-1])["docs"] == 60
    fuzz = _run("fuzz_long.py", "--docs", 5, "--examples-per-round", 3, "--bilm", TINY, cwd=tmp_path)
    assert fuzz.returncode == 0, fuzz.stderr
    assert json.loads(fuzz.stdout.strip().splitlines()[-1])["errors"] == 0


def test_a_missing_bilm_is_an_error_naming_it(tmp_path):
    missing = tmp_path / "absent"
    done = _run("soak.py", "--docs", 1, "--bilm", missing, cwd=tmp_path)
    assert done.returncode != 0 and "absent: no biLM there" in done.stderr
