"""project.yml: the workflows name real commands, and what they read from the repo is there."""
import shlex
from pathlib import Path

import pytest
from weasel.util import load_project_config

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def project():
    return load_project_config(ROOT)


def test_every_workflow_step_is_a_command(project):
    commands = {command["name"] for command in project["commands"]}
    for name, steps in project["workflows"].items():
        missing = [step for step in steps if step not in commands]
        assert not missing, f"workflow {name} names unknown commands {missing}"


def test_main_starts_from_the_shipped_model(project):
    from spacy_elmo.io.loading import shipped_model_dir

    assert (ROOT / project["vars"]["base_model"]).resolve() == shipped_model_dir().resolve()
    steps = project["workflows"]["main"]
    assert "pretrain" not in steps and steps[0] == "finetune-shipped"
    finetune = next(c for c in project["commands"] if c["name"] == "finetune-shipped")
    assert f"--model {project['vars']['base_model']}" in finetune["script"][0]


def test_scripts_lab_modules_and_configs_the_commands_use_exist(project):
    for command in project["commands"]:
        for line in command["script"]:
            words = shlex.split(line)
            for before, word in zip(["", *words], words):
                if word.startswith(("scripts/", "configs/")):
                    assert (ROOT / word).is_file(), f"{command['name']}: {word} is missing"
                if before == "-m" and word.startswith("lab."):  # the lab's modules, run from the checkout
                    assert (ROOT / f"{word.replace('.', '/')}.py").is_file(), f"{command['name']}: {word} is missing"
        for dep in command.get("deps", []):
            # deps inside the repo that no command of the project makes must be committed files
            if dep.startswith(("configs/", "scripts/", "lab/", "sample/", "corpus_sample/", "spacy_elmo/")):
                assert (ROOT / dep).exists(), f"{command['name']}: dependency {dep} is missing"
