"""scripts/run.py (lab/environment.py): the environment is set up in the right order once, and reused while nothing changed; `main`
records its own timing in metrics/main-run.json (ignored by git), `tests` does not."""
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lab import environment

from ..training_runs import ROOT


def load_run(root, monkeypatch):
    """lab.environment working on the checkout ``root`` (its folders patched for this test only)."""
    monkeypatch.setattr(environment, "ROOT", root)
    monkeypatch.setattr(environment, "ENV", root / ".venv")
    monkeypatch.setattr(environment, "STAMP", root / ".venv" / "spacy-elmo-env.json")
    return environment


@pytest.fixture()
def checkout(tmp_path):
    for name in ("requirements.txt", "setup.cfg", "setup.py", "pyproject.toml"):
        if (ROOT / name).is_file():
            shutil.copy(ROOT / name, tmp_path / name)
    return tmp_path


def fake_env(module, monkeypatch, local_torch=True):
    """pip and venv recorded instead of run; the local torch wheel present or not."""
    calls = []

    def pip(*args, check=True):
        calls.append(args)
        if "--no-index" in args:
            return local_torch
        return True

    def create(self, env_dir):
        python = module.env_python()
        python.parent.mkdir(parents=True)
        python.write_text("")

    monkeypatch.setattr(module, "pip", pip)
    monkeypatch.setattr(module.venv.EnvBuilder, "create", create)
    return calls


@pytest.mark.parametrize("local_torch", [True, False])
def test_torch_cpu_build_first_then_requirements_then_the_package(checkout, monkeypatch, local_torch):
    module = load_run(checkout, monkeypatch)
    calls = fake_env(module, monkeypatch, local_torch)
    pin = module.torch_pin()
    assert pin == "torch==2.13.0"
    module.set_up()
    expected = [("install", "--quiet", "--no-index", "--no-deps", pin)]
    if not local_torch:
        expected.append(("install", "--quiet", pin, "--index-url", "https://download.pytorch.org/whl/cpu"))
    expected += [("install", "--quiet", "-r", str(checkout / "requirements.txt")), ("install", "--quiet", "--no-deps", "-e", str(checkout))]
    assert calls == expected
    assert module.up_to_date() and json.loads(module.STAMP.read_text())["files"]["requirements.txt"]


def test_the_environment_is_reused_until_a_setup_file_changes(checkout, monkeypatch):
    module = load_run(checkout, monkeypatch)
    calls = fake_env(module, monkeypatch)
    assert not module.up_to_date()
    module.set_up()
    assert module.up_to_date()
    (checkout / "requirements.txt").write_text((checkout / "requirements.txt").read_text() + "extra-package\n")
    assert not module.up_to_date()
    module.STAMP.write_text("{damaged")
    assert not module.up_to_date()
    assert len(calls) == 3


def test_an_unknown_job_is_a_usage_error_not_a_set_up():
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "run.py"), "deploy"], capture_output=True, text=True)
    assert done.returncode == 2 and "usage: python scripts/run.py {main|tests}" in done.stderr


def fake_jobs(module, monkeypatch, main=("-c", "import time; time.sleep(0.2)")):
    """The environment's Python is this one (it has the package) and `main` a short stand-in job."""
    monkeypatch.setattr(module, "env_python", lambda: Path(sys.executable))
    monkeypatch.setattr(module, "up_to_date", lambda: True)
    monkeypatch.setitem(module.COMMANDS, "main", list(main))
    monkeypatch.setitem(module.COMMANDS, "tests", ["-c", "pass"])


def test_main_records_its_timing_the_machine_and_the_date(checkout, monkeypatch):
    module = load_run(checkout, monkeypatch)
    fake_jobs(module, monkeypatch)
    assert module.main(["main"]) == 0
    record = json.loads((checkout / "metrics" / "main-run.json").read_text(encoding="utf-8"))
    assert record["command"] == "python scripts/run.py main"
    assert record["job"].startswith("python -c ")
    assert record["environment"] == "reused" and record["set_up_s"] == 0
    assert 0.2 <= record["job_s"] < 60 and record["total_s"] == record["job_s"]
    machine = record["provenance"]
    assert machine["command"] == record["command"] and "error" not in machine
    assert machine["started"] <= machine["date"] and machine["model"]["name"] == "en_small"
    assert machine["cpu"] and isinstance(machine["cpu_flags"], list) and machine["cpu_count"] >= 1
    assert machine["date"].startswith("20")


def test_a_set_up_is_timed_and_named_and_a_failed_or_test_run_records_nothing(checkout, monkeypatch):
    module = load_run(checkout, monkeypatch)
    fake_jobs(module, monkeypatch)
    monkeypatch.setattr(module, "up_to_date", lambda: False)
    monkeypatch.setattr(module, "set_up", lambda: time.sleep(0.1))
    assert module.main(["main"]) == 0
    record = json.loads((checkout / "metrics" / "main-run.json").read_text(encoding="utf-8"))
    assert record["environment"] == "refreshed" and record["set_up_s"] >= 0.1
    (checkout / "metrics" / "main-run.json").unlink()
    assert module.main(["tests"]) == 0
    monkeypatch.setitem(module.COMMANDS, "main", ["-c", "raise SystemExit(3)"])
    assert module.main(["main"]) == 3
    assert not (checkout / "metrics").joinpath("main-run.json").exists()


def test_main_runs_the_projects_main_workflow_and_records_its_time_where_git_looks_away():
    # the timing record of `main` is an output of the user's workflow like the others: in project.yml's
    # metrics folder, which git ignores, so that `main` leaves the tracked files as they were
    import srsly

    assert environment.COMMANDS["main"] == ["-m", "spacy", "project", "run", "main"]
    assert environment.RECORDS == srsly.read_yaml(ROOT / "project.yml")["vars"]["metrics"]
    record = environment.record_path("main").relative_to(ROOT).as_posix()
    ignored = subprocess.run(["git", "check-ignore", "--no-index", "-q", record], cwd=ROOT, check=False)
    assert ignored.returncode == 0, f"{record} is not ignored by git"


def test_a_python_older_than_setup_cfg_allows_is_told_which_it_needs_before_anything_is_set_up(checkout, monkeypatch, capsys):
    module = load_run(checkout, monkeypatch)
    calls = fake_env(module, monkeypatch)
    assert module.python_floor(checkout / "setup.cfg") == (3, 10)  # the pinned torch's own floor
    older = module.python_refusal((3, 9, 18))
    assert "Python >= 3.10" in older and "3.9.18" in older and module.torch_pin() in older
    assert module.python_refusal((3, 10, 0)) is None and module.python_refusal() is None
    monkeypatch.setattr(module, "python_floor", lambda setup_cfg=None: (sys.version_info[0], sys.version_info[1] + 1))
    assert module.main(["main"]) == 2
    said = capsys.readouterr().err
    assert f"needs Python >= {sys.version_info[0]}.{sys.version_info[1] + 1}" in said and len(said.splitlines()) == 1
    assert calls == [] and not (checkout / ".venv").exists()
