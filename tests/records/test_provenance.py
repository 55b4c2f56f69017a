import datetime
import hashlib
import os
import platform
import subprocess

import pytest
import torch

import spacy_elmo
import spacy_elmo.records.provenance as module
from spacy_elmo.io import save_bilm
from spacy_elmo.io.loading import shipped_model_dir
from spacy_elmo.records.machine import FLAGS_THAT_MATTER, cpu_flags, cpu_folder, cpu_identity, cpu_model
from spacy_elmo.records.provenance import (
    command_line,
    data_record,
    mark_start,
    model_record,
    portable_path,
    provenance,
)

import lab.records.check as record_check

from ..conftest import DATA, TINY


@pytest.fixture(autouse=True)
def no_marked_start(monkeypatch):
    monkeypatch.setattr(module, "_start", None)


def _git(repo, *args: str) -> str:
    found = subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=test", "-c", "user.email=test@example.com", *args],
        capture_output=True, text=True, check=True,
    )
    return found.stdout.strip()


@pytest.fixture
def checkout(tmp_path, monkeypatch):
    """A git repository with code.py committed as "first", made the checkout provenance reads."""
    if subprocess.run(["git", "--version"], capture_output=True).returncode != 0:
        pytest.skip("needs git")
    repo = tmp_path / "checkout"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / "code.py").write_text("x = 1\n", encoding="utf-8")
    _git(repo, "add", "code.py")
    _git(repo, "commit", "-q", "-m", "first")
    monkeypatch.setattr(module, "CHECKOUT", repo)
    return repo


def commit_results(repo):
    """Commit a results file in ``repo``: an output, which never makes the code dirty. RETURNS repo."""
    (repo / "results").mkdir()
    (repo / "results" / "run.json").write_text("{}\n", encoding="utf-8")
    _git(repo, "add", "results/run.json")
    _git(repo, "commit", "-q", "-m", "results")
    return repo


def test_record_names_command_machine_and_date():
    before = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
    record = provenance("python -m lab.reliability.parity --output results/parity.json")
    after = datetime.datetime.now(datetime.timezone.utc)
    assert record["command"] == "python -m lab.reliability.parity --output results/parity.json"
    assert before <= datetime.datetime.fromisoformat(record["date"]) <= after
    assert (record["cpu_count"], record["torch_threads"]) == (os.cpu_count(), torch.get_num_threads())
    assert (record["python"], record["torch"], record["spacy_elmo"]) == (
        platform.python_version(), torch.__version__, spacy_elmo.__version__
    )
    assert record["cpu"] == cpu_model() and record["cpu_flags"] == cpu_flags()
    assert (record["cpu_id"], record["cpu_folder"]) == (cpu_identity(), cpu_folder())
    assert set(record["cpu_flags"]) <= set(FLAGS_THAT_MATTER)
    assert record["cpu_capability"] == torch.backends.cpu.get_cpu_capability()


def test_commit_and_dirty_are_the_checkouts_as_git_reports_them(checkout, tmp_path, monkeypatch):
    repo = commit_results(checkout)
    first = _git(repo, "rev-parse", "HEAD")
    assert (provenance()["commit"], provenance()["dirty"]) == (first, False)
    (repo / "notes.txt").write_text("untracked\n", encoding="utf-8")  # untracked files leave it clean
    assert provenance()["dirty"] is False
    (repo / "results" / "run.json").write_text('{"rewritten": 1}\n', encoding="utf-8")  # an output, not code
    assert provenance()["dirty"] is False
    (repo / "code.py").write_text("x = 2\n", encoding="utf-8")
    assert (provenance()["commit"], provenance()["dirty"]) == (first, True)
    _git(repo, "commit", "-q", "-am", "second")
    second = _git(repo, "rev-parse", "HEAD")
    assert second != first and (provenance()["commit"], provenance()["dirty"]) == (second, False)
    # outside a git checkout: unknown, not made up
    monkeypatch.setattr(module, "CHECKOUT", tmp_path / "no-checkout")
    assert (provenance()["commit"], provenance()["dirty"]) == (None, None)


def test_a_copy_without_git_reads_commit_and_cleanliness_from_its_manifest(checkout, tmp_path, monkeypatch):
    """A tree sent to another machine without .git: its records name the manifest's commit, and
    dirty says whether any tracked file outside results/ differs from that commit's."""
    repo = commit_results(checkout)
    commit = _git(repo, "rev-parse", "HEAD")
    manifest = tmp_path / "tree-manifest.txt"
    assert module.write_tree_manifest(manifest) == commit
    copy = tmp_path / "copy"
    copy.mkdir()
    (copy / "code.py").write_bytes((repo / "code.py").read_bytes())
    (copy / "results").mkdir()
    (copy / "results" / "run.json").write_text('{"written": "on the other machine"}\n', encoding="utf-8")
    monkeypatch.setattr(module, "CHECKOUT", copy)
    monkeypatch.setenv(module.TREE_MANIFEST_ENV, str(manifest))
    assert (provenance()["commit"], provenance()["dirty"], provenance()["start_clean"]) == (commit, False, True)
    (copy / "code.py").write_text("x = 2\n", encoding="utf-8")
    assert (provenance()["commit"], provenance()["dirty"]) == (commit, True)
    (copy / "code.py").unlink()  # a missing file is a change too
    assert provenance()["dirty"] is True
    manifest.write_text("not a manifest\n", encoding="utf-8")
    with pytest.raises(ValueError, match="not a tree manifest"):
        provenance()


def test_a_package_main_reads_as_python_dash_m(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    main = tmp_path / "spacy_elmo" / "__main__.py"
    argv = [str(main), "neighbors", "--output", str(tmp_path / "out" / "n.json"), "--query", "the river bank"]
    assert command_line(argv) == "python -m spacy_elmo neighbors --output out/n.json --query 'the river bank'"


def test_each_path_of_a_comma_separated_list_is_made_portable(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = ["old=results/a.json,/elsewhere/runs/s1/metrics,%s/runs/s2" % tmp_path, "--title", "a, b /c"]
    assert command_line(["scripts/r.py", *args]) == (
        "python scripts/r.py old=results/a.json,.../runs/s1/metrics,runs/s2 --title 'a, b /c'"
    )


def test_a_script_path_is_made_relative(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert command_line([str(tmp_path / "scripts" / "soak.py"), "--docs", "5"]) == "python scripts/soak.py --docs 5"


def _sha(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_the_record_names_the_commit_and_cleanliness_the_run_started_from(checkout):
    repo = checkout
    first = _git(repo, "rev-parse", "HEAD")
    start = mark_start("python scripts/run_it.py")
    (repo / "code.py").write_text("x = 2\n", encoding="utf-8")  # the code changes while the run goes on
    _git(repo, "commit", "-q", "-am", "second")
    record = provenance(model=None, model_note="none", data={}, data_note="none")
    assert (record["start_commit"], record["start_clean"], record["started"]) == (first, True, start["started"])
    assert record["commit"] != first and record["command"] == "python scripts/run_it.py"
    assert "unknown" not in record and record_check.check_record({"provenance": record}) == []
    # a snapshot taken elsewhere (another process) is handed over explicitly
    given = {"command": None, "start_commit": "f" * 40, "start_clean": False, "started": start["started"]}
    assert provenance(start=given)["start_commit"] == "f" * 40


def test_a_run_that_marked_no_start_says_so_and_fails_the_check(monkeypatch):
    monkeypatch.setattr(record_check, "SCHEMA_DATE", "2000-01-01T00:00:00+00:00")  # whatever this machine's clock says
    record = provenance("python x.py", model=None, model_note="none", data={}, data_note="none")
    assert record["started"] is None and "mark_start" in record["unknown"]["started"]
    problems = record_check.check_record({"provenance": record})
    assert any(p.startswith("provenance.started: null") for p in problems)
    assert any(p.startswith("provenance.unknown:") for p in problems)


def test_model_record_names_the_shipped_model_its_version_and_weights():
    record = model_record()
    weights = shipped_model_dir() / "model.safetensors"
    card = (shipped_model_dir() / "MODEL_CARD.md").read_text(encoding="utf-8").splitlines()[0]
    assert record["name"] == "en_small" and f"({record['version']})" in card
    assert record["weights"] == "spacy_elmo/models/en_small/model.safetensors" and record["weights_sha256"] == _sha(weights)


def test_model_record_of_a_published_pair_and_of_a_training_output(tmp_path, tiny_bilm):
    pair = model_record(options=TINY / "options.json", weights=TINY / "weights.hdf5")
    assert pair == {"name": "tests/data/allennlp/tiny", "version": "unversioned",
                    "weights": "tests/data/allennlp/tiny/weights.hdf5", "weights_sha256": _sha(TINY / "weights.hdf5")}
    assert model_record(TINY) == pair  # the folder holding the pair
    trained = save_bilm(tiny_bilm, tmp_path / "run" / "model-best", extra={"stage": "pretrain", "step": 300})
    record = model_record(trained)
    assert record["version"] == "pretrain step 300" and record["weights_sha256"] == _sha(trained / "model.safetensors")
    assert record["name"] == record["weights"].rsplit("/", 1)[0] == f".../{tmp_path.name}/run/model-best"


def test_model_record_of_a_tensorflow_checkpoint_names_its_data_shard_and_index():
    folder = DATA / "bilm_tf" / "checkpoint_folder"
    record = model_record(folder)
    assert record == {
        "name": "tests/data/bilm_tf/checkpoint_folder", "version": "unversioned",
        "weights": "tests/data/bilm_tf/checkpoint_folder/model.ckpt-24.data-00000-of-00001",
        "weights_sha256": _sha(folder / "model.ckpt-24.data-00000-of-00001"),
        "also_sha256": {"model.ckpt-24.index": _sha(folder / "model.ckpt-24.index")},
    }
    packed = model_record(DATA / "bilm_tf" / "deeppavlov_lm.tar.gz")  # an archive is one file
    assert packed["weights"] == "tests/data/bilm_tf/deeppavlov_lm.tar.gz"
    assert packed["weights_sha256"] == _sha(DATA / "bilm_tf" / "deeppavlov_lm.tar.gz") and "also_sha256" not in packed


def test_data_record_hashes_each_file_read_by_its_portable_path(tmp_path, monkeypatch):
    data = tmp_path / "mirror" / "datasets"
    (data / "wic").mkdir(parents=True)
    (data / "wic" / "a.txt").write_text("a\n", encoding="utf-8")
    (data / "wic" / "b.txt").write_text("b\n", encoding="utf-8")
    (data / "wic" / ".hidden").write_text("skipped\n", encoding="utf-8")
    record = data_record([data / "wic", None, TINY / "sentences.json"])
    assert record == {
        "assets/datasets/wic/a.txt": _sha(data / "wic" / "a.txt"),
        "assets/datasets/wic/b.txt": _sha(data / "wic" / "b.txt"),
        "tests/data/allennlp/tiny/sentences.json": _sha(TINY / "sentences.json"),
    }
    assert data_record(None) == {}


def test_data_record_keeps_every_digest_when_two_corpora_share_shard_names(tmp_path):
    shards = []
    for corpus in ("corpus-wide", "corpus-full"):
        folder = tmp_path / corpus / "pretrain" / "train"
        folder.mkdir(parents=True)
        (folder / "train-00.txt").write_text(f"{corpus}\n", encoding="utf-8")
        shards.append(folder / "train-00.txt")
    record = data_record([tmp_path / "corpus-wide", tmp_path / "corpus-full", shards[0]])
    assert record == {
        ".../corpus-wide/pretrain/train/train-00.txt": _sha(shards[0]),
        ".../corpus-full/pretrain/train/train-00.txt": _sha(shards[1]),
    }


def test_portable_paths_hold_no_machine_directory(tmp_path, monkeypatch):
    monkeypatch.delenv("SPACY_ELMO_DATA", raising=False)
    assert portable_path(module.CHECKOUT / "configs" / "ner.cfg") == "configs/ner.cfg"
    assert portable_path(tmp_path / "shared" / "datasets" / "wic" / "x.txt") == "assets/datasets/wic/x.txt"
    monkeypatch.setenv("SPACY_ELMO_DATA", str(tmp_path / "my-data"))
    assert portable_path(tmp_path / "my-data" / "conll2003" / "eng.train") == "assets/datasets/conll2003/eng.train"
    assert portable_path(tmp_path / "runs" / "model-best") == f".../{tmp_path.name}/runs/model-best"
    monkeypatch.chdir(tmp_path)
    assert command_line(["scripts/x.py", "--elmo", "/elsewhere/runs/model-best", f"input={tmp_path}/a/metrics"]) == (
        "python scripts/x.py --elmo .../runs/model-best input=a/metrics"
    )
    # the machine's top-level folder is never named, however short the path
    assert portable_path("/work/run-mix/probe") == ".../run-mix/probe"
    assert portable_path("/runs/corpus") == ".../corpus"
    assert portable_path("/work") == "..."


def test_a_module_run_with_dash_m_is_written_so():
    assert command_line(["lab/corpus/mix_corpus.py", "--times", "1"], module="lab.corpus.mix_corpus") == (
        "python -m lab.corpus.mix_corpus --times 1"
    )
    assert command_line(["spacy_elmo/__main__.py", "evaluate"], module="spacy_elmo.__main__") == "python -m spacy_elmo evaluate"


def test_a_run_from_a_dirty_tree_passes_the_check_only_with_a_note(checkout, monkeypatch):
    monkeypatch.delenv("SPACY_ELMO_DIRTY_NOTE", raising=False)  # tests/conftest.py sets it for the suite
    mark_start("python scripts/run_it.py")
    (checkout / "code.py").write_text("x = 3\n", encoding="utf-8")  # uncommitted, before the run starts
    mark_start("python scripts/run_it.py")
    record = provenance(model=None, model_note="none", data={}, data_note="none")
    assert record["start_clean"] is False
    assert any(p.startswith("provenance.dirty_note") for p in record_check.check_record({"provenance": record}))
    monkeypatch.setenv("SPACY_ELMO_DIRTY_NOTE", "code.py set x to 3, which the run does not read")
    record = provenance(model=None, model_note="none", data={}, data_note="none")
    assert record["dirty_note"] == "code.py set x to 3, which the run does not read"
    assert record_check.check_record({"provenance": record}) == []
