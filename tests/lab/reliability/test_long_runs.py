"""The long reliability runs (lab/reliability/soak_long.py, lab/reliability/fuzz_long.py) use lab/reliability/fuzz.py and
lab/reliability/soak.py, as the tests do, and import nothing from the tests."""
import hashlib
import json
import os
import re
import subprocess
import sys

import pytest

from spacy_elmo.fast import kernel_library

from ...conftest import TINY
from ...training_runs import ROOT


def test_the_lab_and_benchmarks_import_nothing_from_the_tests():
    for path in sorted([*(ROOT / "scripts").glob("*.py"), *(ROOT / "lab").rglob("*.py"), *(ROOT / "bench").glob("*.py")]):
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"^\s*(from|import)\s+tests\b", text, re.MULTILINE), path.name


def _run(module, *args, env=None):
    # -E -s: no PYTHONPATH, no user site; -m from the checkout puts it first on the path (the lab is not
    # installed), so the installed package and the checkout's folders are all a run can import
    command = [sys.executable, "-E", "-s", "-m", module, *map(str, args)]
    # PATH and HOME: the compiled loop is built (compiler and linker) and kept where it would be
    kept = {name: os.environ[name] for name in ("PATH", "HOME") if name in os.environ}
    return subprocess.run(command, capture_output=True, text=True, cwd=ROOT,
                          env={**kept, "OMP_NUM_THREADS": "1", **(env or {})})


def _assert_names_the_model_and_the_loop(record, loop):
    weights = hashlib.sha256((TINY / "weights.hdf5").read_bytes()).hexdigest()
    assert record["model"]["weights_sha256"] == weights and record["model"]["weights"].endswith("tiny/weights.hdf5")
    assert record["model_files"]["sha256"]["weights.hdf5"] == weights
    assert set(record["model_files"]["sha256"]) >= {"options.json", "weights.hdf5"}
    assert record["data"] == {} and record["data_note"] and record["start_commit"] == record["commit"]
    assert record["inference"]["compiled_loop"] == loop
    assert record["inference"]["compiled_library"] == kernel_library.library_path().name
    assert record["commit"] is None or len(record["commit"]) == 40


@pytest.mark.slow
def test_the_long_soak_and_fuzz_runs_name_the_model_and_the_loop():
    soak = _run("lab.reliability.soak_long", "--docs", 60, "--sample-every", 20, "--max-growth", 1000, "--bilm", TINY)
    assert soak.returncode == 0, soak.stderr
    summary = json.loads(soak.stdout.strip().splitlines()[-1])
    assert summary["docs"] == 60 and summary["samples"][-1] == [60, summary["rss_mb_final"]]
    assert summary["max_growth_pct"] == 1000 and summary["peak_growth_pct"] >= summary["growth_pct"]
    # the default path takes the compiled loop unless its library was refused or cannot be built here
    state = kernel_library.status()
    default_loop = "refused" if state.get("refused") else "failed" if state["failed"] else "loaded"
    _assert_names_the_model_and_the_loop(summary["provenance"], default_loop)
    fuzz = _run("lab.reliability.fuzz_long", "--docs", 5, "--examples-per-round", 3, "--bilm", TINY,
                env={kernel_library.ENV: "0"})
    assert fuzz.returncode == 0, fuzz.stderr
    summary = json.loads(fuzz.stdout.strip().splitlines()[-1])
    assert summary["errors"] == 0
    _assert_names_the_model_and_the_loop(summary["provenance"], "switched off")


def test_a_missing_bilm_is_an_error_naming_it(tmp_path):
    missing = tmp_path / "absent"
    done = _run("lab.reliability.soak_long", "--docs", 1, "--bilm", missing)
    assert done.returncode == 1 and f"error: {missing}: not found" in done.stderr and "Traceback" not in done.stderr


def test_the_lab_reads_nothing_beside_the_checkout():
    """Defaults live in the checkout (the tiny model is the tests' own fixture) or come from options;
    no lab module or script reaches for a folder next to the checkout or names a machine's directories."""
    lab = [*(ROOT / "lab").rglob("*.py"), *(ROOT / "scripts").glob("*.py"), *(ROOT / "scripts").glob("*.sh")]
    for path in sorted(lab):
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"""\.\./shared|["']shared["']\s*/|parent\.parent\.parent""", text), path.name
        assert not re.search(r"""["'](/work|/home|/root)/""", text), path.name
    for name in ("soak_long.py", "fuzz_long.py"):
        text = (ROOT / "lab" / "reliability" / name).read_text(encoding="utf-8")
        assert 'CHECKOUT / "tests" / "data" / "allennlp" / "tiny"' in text, name
    assert (ROOT / "tests" / "data" / "allennlp" / "tiny" / "weights.hdf5").is_file()
