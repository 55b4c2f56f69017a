"""The two spaCy projects: project.yml (the user's workflow on the bundled sample) and lab/project.yml
(the campaigns behind the shipped biLM). Their workflows name real commands, what they read from the
repo is there, and the user's project names no campaign."""
import re
import shlex
import subprocess
from pathlib import Path

import pytest
from weasel.util import load_project_config

ROOT = Path(__file__).resolve().parents[1]
LAB = ROOT / "lab"
CAMPAIGN_SH = ROOT / "lab" / "campaign" / "campaign.sh"


@pytest.fixture(scope="module")
def project():
    return load_project_config(ROOT)


@pytest.fixture(scope="module")
def lab_project():
    return load_project_config(LAB)


def script_words(command):
    """RETURNS (List[List[str]]): each script line of a command, split as the project runner splits it."""
    return [shlex.split(line) for line in command["script"]]


@pytest.mark.parametrize("folder", [ROOT, LAB], ids=["project", "lab"])
def test_every_workflow_step_is_a_command(folder):
    project = load_project_config(folder)
    commands = {command["name"] for command in project["commands"]}
    for name, steps in project["workflows"].items():
        missing = [step for step in steps if step not in commands]
        assert not missing, f"workflow {name} names unknown commands {missing}"


def test_main_starts_from_the_shipped_model(project):
    from spacy_elmo.io.loading import SHIPPED_NAME, locate_bilm, shipped_model_dir

    # by name, as the installed package knows it: a copy of the project needs no path into the package
    assert project["vars"]["base_model"] == SHIPPED_NAME
    assert locate_bilm(project["vars"]["base_model"]).directory.resolve() == shipped_model_dir().resolve()
    steps = project["workflows"]["main"]
    assert "pretrain" not in steps and steps[0] == "finetune-shipped"
    finetune = next(c for c in project["commands"] if c["name"] == "finetune-shipped")
    assert f"--model {project['vars']['base_model']}" in finetune["script"][0]


def test_scripts_and_configs_the_commands_use_exist(project):
    for command in project["commands"]:
        for words in script_words(command):
            for before, word in zip(["", *words], words):
                if word.startswith(("scripts/", "configs/")):
                    assert (ROOT / word).is_file(), f"{command['name']}: {word} is missing"
        for dep in command.get("deps", []):
            # deps inside the repo that no command of the project makes must be committed files
            if dep.startswith(("configs/", "scripts/", "lab/", "sample/", "corpus_sample/", "spacy_elmo/")):
                assert (ROOT / dep).exists(), f"{command['name']}: dependency {dep} is missing"


def test_the_users_project_names_no_campaign(project, lab_project):
    # the campaigns are the lab's project: no command, workflow or var of theirs in the user's
    lab_names = {c["name"] for c in lab_project["commands"]} | set(lab_project["workflows"])
    names = {c["name"] for c in project["commands"]} | set(project["workflows"])
    assert not names & lab_names, f"in both projects: {sorted(names & lab_names)}"
    assert not [n for n in names if n.startswith(("campaign", "wide", "shipped-model", "downstream-full", "semantic"))]
    assert not [v for v in project["vars"] if v.startswith(("campaign", "wide", "full", "release"))]
    text = (ROOT / "project.yml").read_text(encoding="utf-8")
    assert "campaign.sh" not in text and "lab/project.yml" in text  # and it says where they went


# what the user's project may read that no command of it writes: the folders it ships with
PROJECT_FILES = ("project.yml", "configs", "sample", "corpus_sample")
# the options through which a command of the project names a file or folder it writes
WRITING_OPTIONS = ("--output", "--table", "--plot", "--records", "--wheel-dir")


def written_paths(command):
    """RETURNS (List[str]): every path a command says it writes: its outputs and its writing options' values."""
    paths = list(command.get("outputs", []))
    for words in script_words(command):
        paths += [after for before, after in zip(words, words[1:]) if before in WRITING_OPTIONS]
    return paths


def test_the_users_project_stands_alone_in_its_folder(project):
    # the installed package and the project's own files: nothing of the lab, the package's source or results/
    text = (ROOT / "project.yml").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 250 and "lab." not in text.replace("lab/project.yml", "")
    made = {path for command in project["commands"] for path in written_paths(command)}
    for command in project["commands"]:
        for words in script_words(command):
            assert words[:3] in (["python", "-m", "spacy_elmo"], ["python", "-m", "spacy"], ["python", "-m", "pip"]), words
        for dep in command.get("deps", []):
            shipped = dep.split("/")[0] in PROJECT_FILES and (ROOT / dep).exists()
            assert shipped or any(dep == m or dep.startswith(m + "/") for m in made), f"{command['name']}: {dep}"


def test_every_path_the_users_project_writes_lies_in_a_folder_git_ignores(project):
    # so that running `main` (twice, or before the tests) leaves every tracked file as it was
    written = {path for command in project["commands"] for path in written_paths(command)}
    paths = sorted(written | set(project["directories"]) | {"project.lock"})
    assert "metrics/sample.md" in paths and "packages/dist" in paths
    checked = subprocess.run(["git", "check-ignore", "--verbose", "--non-matching", *paths], cwd=ROOT,
                             capture_output=True, text=True, check=False)
    not_ignored = [line.split("\t")[-1] for line in checked.stdout.splitlines() if line.startswith("::")]
    assert not_ignored == [], f"written by the project but not ignored by git: {not_ignored}"


def test_the_campaigns_run_from_the_checkout_and_their_scripts_exist(lab_project):
    # spaCy runs a project's commands in its folder: each lab command goes through the launcher or
    # lab/campaign/campaign.sh (which changes to the checkout), and names paths from the checkout
    checkout = (LAB / lab_project["vars"]["checkout"]).resolve()
    assert checkout == ROOT
    stages = set(re.findall(r"^  ([a-z]+)\)", CAMPAIGN_SH.read_text(encoding="utf-8"), re.M))
    for command in lab_project["commands"]:
        name = command["name"]
        for words in script_words(command):
            if words[0] == "python":
                launcher, module, args = words[1], words[2], words[3:]
                assert (LAB / launcher).resolve() == ROOT / "lab" / "in_checkout.py", f"{name}: {words}"
                package = ROOT / module.replace(".", "/")
                assert package.with_suffix(".py").is_file() or (package / "__main__.py").is_file(), f"{name}: {module}"
            else:
                shell = words.index("bash")
                assert words[0] == "env" and all("=" in w for w in words[1:shell]), f"{name}: {words}"
                script, stage, args = words[shell + 1], words[shell + 2], words[shell + 3:]
                assert (LAB / script).resolve() == CAMPAIGN_SH, f"{name}: {script}"
                assert stage in stages, f"{name}: lab/campaign/campaign.sh has no stage {stage}"
            for word in args:
                if word.startswith(("configs/", "scripts/", "lab/", "spacy_elmo/", "sample/")):
                    assert (ROOT / word).exists(), f"{name}: {word} is missing"
        for path in [*command.get("deps", []), *command.get("outputs", [])]:
            assert (LAB / path).resolve().is_relative_to(ROOT), f"{name}: {path} is outside the checkout"
            relative = (LAB / path).resolve().relative_to(ROOT).as_posix()
            if relative.startswith(("configs/", "scripts/", "lab/", "spacy_elmo/")):
                assert (ROOT / relative).exists(), f"{name}: dependency {relative} is missing"


def test_the_release_folder_is_the_shipped_models_version(lab_project):
    # the full experiment and semantic-change write into results/en_small/VERSION/ (results/README.md)
    from spacy_elmo.io.loading import shipped_model_dir
    from spacy_elmo.records.provenance import model_record

    version = model_record(shipped_model_dir())["version"]
    assert lab_project["vars"]["release_results"] == f"results/en_small/{version}"
    assert lab_project["vars"]["full_elmo"] == project_relative(shipped_model_dir())


def project_relative(path):
    """RETURNS (str): a path in the checkout, relative to it."""
    return Path(path).resolve().relative_to(ROOT).as_posix()
