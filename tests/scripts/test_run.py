"""scripts/run.py: the environment is set up in the right order once, and reused while nothing changed."""
import importlib.util
import json
import shutil
import subprocess
import sys

import pytest

from ..training_runs import ROOT


def load_run(root):
    spec = importlib.util.spec_from_file_location("run_script", ROOT / "scripts" / "run.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.ROOT, module.ENV = root, root / ".venv"
    module.STAMP = module.ENV / "spacy-elmo-env.json"
    return module


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
    module = load_run(checkout)
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
    module = load_run(checkout)
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
