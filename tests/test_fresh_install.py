"""What a new user on a fresh machine needs: how to get torch's CPU build, how CI is checked, and a copy
of the project's folder that runs with the package installed from its wheel.

The commands are read as the shell and pip read them (``bash -n``, pip's own option parser), so a
typo in a flag, an install in the wrong order or a pin that drifted from requirements.txt fails here.
"""
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import srsly
import torch
from packaging.requirements import Requirement
from packaging.version import Version
from pip._internal.commands import create_command
from spacy.tokens import DocBin
from spacy.vocab import Vocab

from lab.release.package_pipeline import PTH_NAME, build_spacy_elmo_wheel, environment_paths

from .test_project import PROJECT_FILES
from .training_runs import ROOT

CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def _bash_blocks(markdown: str) -> list:
    """RETURNS (list): the contents of the ```bash blocks in ``markdown``, in order."""
    return re.findall(r"^```bash\n(.*?)^```", markdown, re.MULTILINE | re.DOTALL)


def _assert_bash_parses(script: str) -> None:
    found = subprocess.run(["bash", "-n"], input=script, capture_output=True, text=True, check=False)
    assert found.returncode == 0, f"bash cannot parse:\n{script}\n{found.stderr}"


def _pip_installs(script: str) -> list:
    """Every ``pip install`` in a shell script, parsed by pip.

    RETURNS (list): (options, arguments) per install, in the script's order.
    """
    commands = []
    for line in script.splitlines():
        commands.append([])
        for word in shlex.split(line, comments=True):
            if word in ("&&", "||", ";"):
                commands.append([])
            else:
                commands[-1].append(word)
    installs = []
    for command in commands:
        # "pip install ..." or "python -m pip install ..."
        at = next((i for i in range(len(command) - 1) if command[i: i + 2] == ["pip", "install"]), None)
        if at is not None:
            installs.append(create_command("install").parse_args(command[at + 2:]))
    return installs


def _requirements() -> dict:
    """RETURNS (dict): name -> Requirement for every line of requirements.txt (each must parse)."""
    lines = (ROOT / "requirements.txt").read_text(encoding="utf-8").splitlines()
    found = [Requirement(line.split("#")[0].strip()) for line in lines if line.split("#")[0].strip()]
    return {requirement.name: requirement for requirement in found}


def test_readme_set_up_installs_the_cpu_build_of_the_pinned_torch_before_the_requirements():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    set_up = _bash_blocks(readme[readme.index("## Set-up"):])[0]
    _assert_bash_parses(set_up)
    installs = _pip_installs(set_up)
    torch_at = next(i for i, (_, args) in enumerate(installs) if any(Requirement(a).name == "torch" for a in args))
    requirements_at = next(i for i, (options, _) in enumerate(installs) if options.requirements == ["requirements.txt"])
    options, args = installs[torch_at]
    assert options.index_url == CPU_INDEX and torch_at < requirements_at
    # the CPU build satisfies requirements.txt's pin only if both name the same exact version
    readme_torch, pinned = Requirement(args[0]), _requirements()["torch"]
    assert str(readme_torch.specifier) == str(pinned.specifier) and re.fullmatch(r"==[\d.]+", str(pinned.specifier))
    last, last_args = installs[-1]
    assert last.editables == ["."] and last.ignore_dependencies and not last_args  # the package, nothing pulled in
    # this environment was made that way: its torch is the pinned release
    assert Version(torch.__version__).release == Version(str(pinned.specifier)[2:]).release


def test_ci_readme_commands_parse_and_name_what_ci_really_does():
    text = (ROOT / ".ci" / "README.md").read_text(encoding="utf-8")
    blocks = _bash_blocks(text)
    assert blocks
    for block in blocks:
        _assert_bash_parses(block)
    run = ROOT / ".ci" / "run"
    assert any("bash .ci/run" in block for block in blocks) and run.is_file()
    script = run.read_text(encoding="utf-8")
    _assert_bash_parses(script)
    # CI runs the README's two commands, word for word, in its order: `main`, then the tests on what it left
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    two = _bash_blocks(readme[readme.index("## The two commands"):])[0]
    readme_commands = [shlex.split(line, comments=True) for line in two.splitlines() if line.strip()]
    ci_commands = [shlex.split(line, comments=True) for line in script.splitlines() if line.strip()]
    ci_commands = [c for c in ci_commands if c and c[0] not in ("set", "cd", "export")]
    assert readme_commands == [["python", "scripts/run.py", "main"], ["python", "scripts/run.py", "tests"]]
    assert ci_commands == readme_commands
    # `spacy project run main` runs a workflow that ends in the `package` step that builds the wheel listed next
    project = srsly.read_yaml(ROOT / "project.yml")
    assert any("git status --porcelain --untracked-files=no" in block for block in blocks)
    assert project["workflows"]["main"][-1] == "package"
    package = next(command for command in project["commands"] if command["name"] == "package")
    assert package["outputs"] == ["packages/dist"] and "ls packages/dist" in text

def _venv_with_the_wheel(tmp_path: Path) -> Path:
    """A new venv holding spacy-elmo's wheel, built from the checkout, and seeing this environment's
    packages (spaCy, torch, ...) through a .pth file of plain directories: not the checkout, not an
    editable install. RETURNS (Path): its Python."""
    wheel = build_spacy_elmo_wheel(tmp_path / "dist")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    install = [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-index", "--no-deps", "--quiet"]
    subprocess.run([*install, str(wheel)], check=True)
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                          capture_output=True, text=True, check=True).stdout.strip()
    (Path(site) / PTH_NAME).write_text("".join(p + "\n" for p in environment_paths()), encoding="utf-8")
    return python


@pytest.mark.slow
def test_a_copy_of_the_projects_folder_runs_with_the_package_installed_from_its_wheel(tmp_path):
    python = _venv_with_the_wheel(tmp_path)
    project = tmp_path / "project"
    project.mkdir()
    for name in PROJECT_FILES:  # the project's folder as a user copies it: no lab/, no spacy_elmo/, no results/
        copy = shutil.copy2 if (ROOT / name).is_file() else shutil.copytree
        copy(ROOT / name, project / name)
    environ = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(python), *args], cwd=project, env=environ, capture_output=True, text=True, check=False)

    where = run("-c", "import spacy_elmo; print(spacy_elmo.__file__)")
    assert Path(where.stdout.strip()).resolve().is_relative_to(python.parent.parent.resolve()), where
    steps = srsly.read_yaml(ROOT / "project.yml")["workflows"]["main"]
    dry = run("-m", "spacy", "project", "run", "main", "--dry")
    assert dry.returncode == 0 and all(f" {step} " in dry.stdout for step in steps), dry.stdout + dry.stderr
    # the first step that needs no training, for real: the sample's .spacy files, its fractions nested
    done = run("-m", "spacy", "project", "run", "downstream-sample-corpus")
    assert done.returncode == 0, done.stdout + done.stderr
    sentences = {pct: [s.text for d in DocBin().from_disk(project / f"corpus/downstream-sample/upos-train-{pct}.spacy").get_docs(Vocab())
                       for s in d.sents] for pct in (1, 10, 100)}
    assert 0 < len(sentences[1]) < len(sentences[10]) < len(sentences[100])
    assert set(sentences[1]) <= set(sentences[10]) <= set(sentences[100])
    # and it wrote only in its own folders (ignored by git in the checkout: tests/test_project.py)
    directories = srsly.read_yaml(ROOT / "project.yml")["directories"]
    assert {path.name for path in project.iterdir()} - set(PROJECT_FILES) <= {*directories, "project.lock"}
