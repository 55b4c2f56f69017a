"""Every results file names what made it: each JSON under results/ holds the record of
spacy_elmo.records.provenance (command, start commit and cleanliness, model and weights, data checksums,
machine, date) at its top level, and no machine path; and the tree keeps its one rule: a version, a
run or a machine is a folder, never part of a file name (results/README.md)."""
import json
import re
from pathlib import Path

import pytest

from lab.records.check import check_record, machine_paths
from spacy_elmo.records.machine import cpu_folder

ROOT = Path(__file__).resolve().parents[3]
RESULTS = ROOT / "results"
FILES = sorted(RESULTS.rglob("*.json"))
VERSION = re.compile(r"\d+\.\d+\.\d+")


def is_model_config(data) -> bool:
    """A copy of a model directory's config.json (lab/campaign/campaign.sh results keeps model-best's): it
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


def test_a_version_is_a_folder_of_its_own():
    # "en_small/0.6.0/full.md", never "full-0.6.0.md" or "en_small-0.6.0/"
    misplaced = sorted({p.relative_to(RESULTS).as_posix() for p in RESULTS.rglob("*")
                        if VERSION.search(p.name) and not (p.is_dir() and VERSION.fullmatch(p.name))})
    assert not misplaced, f"a version in a name (make it a folder): {misplaced}"


def test_benchmarks_sit_in_a_folder_per_machine():
    bench = RESULTS / "bench"
    machines = sorted(p.name for p in bench.iterdir() if p.is_dir())
    assert machines and not [p.name for p in bench.iterdir() if p.is_file()], "a benchmark record outside a machine folder"
    named = [p.relative_to(RESULTS).as_posix() for p in bench.rglob("*") if p.is_file()
             and any(machine in p.name for machine in machines)]
    assert not named, f"a machine in a file name (the folder says it): {named}"
    assert not (ROOT / "bench" / "results").exists(), "bench/results/: benchmark records go to results/bench/MACHINE/"


# the folders of records written before provenance gave a CPU's family and model (docs/speed.md says
# how each was assigned): a family the flags prove, or no CPU at all
UNRECORDED_MODEL = re.compile(r"(amd|intel)-f\d+-model-unrecorded|cpu-unrecorded")
CPU_FOLDER = re.compile(r"[a-z0-9]+-f\d+-m\d+|arm-0x[0-9a-f]+-0x[0-9a-f]+|[a-z0-9_]+-unidentified")


@pytest.mark.parametrize("kind", ["bench", "export"])
def test_a_machine_folder_is_named_by_its_cpus_vendor_family_and_model(kind):
    folders = sorted(p.name for p in (RESULTS / kind).iterdir() if p.is_dir())
    misnamed = [f for f in folders if not (CPU_FOLDER.fullmatch(f) or UNRECORDED_MODEL.fullmatch(f))]
    assert folders and not misnamed, f"results/{kind}/: folders not named as records.machine.cpu_folder names a CPU: {misnamed}"


def test_a_record_that_names_its_cpus_folder_sits_in_it():
    for kind in ("bench", "export"):
        for path in sorted((RESULTS / kind).rglob("*.json")):
            record = json.loads(path.read_text(encoding="utf-8")).get("provenance") or {}
            if "cpu_id" in record:  # written since provenance identifies the CPU
                assert record["cpu_folder"] == cpu_folder(record["cpu_id"]) == path.relative_to(RESULTS / kind).parts[0], path
