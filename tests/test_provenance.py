import datetime
import os
import platform
import subprocess

import pytest
import torch

import spacy_elmo
import spacy_elmo.provenance as module
from spacy_elmo.provenance import FLAGS_THAT_MATTER, command_line, provenance


def _git(repo, *args: str) -> str:
    found = subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=test", "-c", "user.email=test@example.com", *args],
        capture_output=True, text=True, check=True,
    )
    return found.stdout.strip()


def test_record_names_command_machine_and_date():
    before = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
    record = provenance("python scripts/parity.py --output results/parity.json")
    after = datetime.datetime.now(datetime.timezone.utc)
    assert record["command"] == "python scripts/parity.py --output results/parity.json"
    assert before <= datetime.datetime.fromisoformat(record["date"]) <= after
    assert (record["cpu_count"], record["torch_threads"]) == (os.cpu_count(), torch.get_num_threads())
    assert (record["python"], record["torch"], record["spacy_elmo"]) == (
        platform.python_version(), torch.__version__, spacy_elmo.__version__
    )
    assert record["cpu"] == module.cpu_model() and record["cpu_flags"] == module.cpu_flags()
    assert set(record["cpu_flags"]) <= set(FLAGS_THAT_MATTER)
    assert record["cpu_capability"] == torch.backends.cpu.get_cpu_capability()


@pytest.mark.skipif(subprocess.run(["git", "--version"], capture_output=True).returncode != 0, reason="needs git")
def test_commit_and_dirty_are_the_checkouts_as_git_reports_them(tmp_path, monkeypatch):
    repo = tmp_path / "checkout"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / "code.py").write_text("x = 1\n", encoding="utf-8")
    (repo / "results").mkdir()
    (repo / "results" / "run.json").write_text("{}\n", encoding="utf-8")
    _git(repo, "add", "code.py", "results/run.json")
    _git(repo, "commit", "-q", "-m", "first")
    monkeypatch.setattr(module, "CHECKOUT", repo)
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


def test_cpu_flags_read_from_cpuinfo(tmp_path, monkeypatch):
    fake = tmp_path / "cpuinfo"
    fake.write_text("model name\t: X\nflags\t\t: fpu avx2 fma avx512f amx_bf16 sse\n", encoding="utf-8")
    real_path = module.Path
    monkeypatch.setattr(module, "Path", lambda p: fake if p == "/proc/cpuinfo" else real_path(p))
    assert module.cpu_flags() == ["avx2", "fma", "avx512f", "amx_bf16"]


def test_a_package_main_reads_as_python_dash_m(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    main = tmp_path / "spacy_elmo" / "__main__.py"
    argv = [str(main), "neighbors", "--output", str(tmp_path / "out" / "n.json"), "--query", "the river bank"]
    assert command_line(argv) == "python -m spacy_elmo neighbors --output out/n.json --query 'the river bank'"


def test_a_script_path_is_made_relative(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert command_line([str(tmp_path / "scripts" / "soak.py"), "--docs", "5"]) == "python scripts/soak.py --docs 5"
