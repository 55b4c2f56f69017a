"""Where the probes find their default data: an explicit folder, $SPACY_ELMO_DATA, or the project's
assets folder; a missing file names itself, its project.yml asset and the command that fetches it."""
import hashlib
import os
from pathlib import Path

import pytest
from weasel.util import load_project_config

from spacy_elmo.probes.task_data import DATA_ENV, DEFAULTS, PROJECT_DATA, default_data_dir, task_files

from .conftest import tagged_sentences, write_conllu

ROOT = Path(__file__).resolve().parents[2]


def _mirror() -> Path:
    """The datasets this checkout is tested with: $SPACY_ELMO_DATA, else the checkout's project data folder."""
    return Path(os.environ[DATA_ENV]) if os.environ.get(DATA_ENV) else ROOT / PROJECT_DATA


def _ewt(root: Path) -> Path:
    folder = root / "ud_english_ewt"
    folder.mkdir(parents=True)
    write_conllu(folder / "en_ewt-ud-train.conllu", tagged_sentences(5, seed=1))
    write_conllu(folder / "en_ewt-ud-dev.conllu", tagged_sentences(3, seed=2))
    return root


def _asset_checksums() -> dict:
    project = load_project_config(ROOT, overrides={"vars.datasets": "DATA"})
    return {asset["dest"][len("DATA/"):]: asset["checksum"] for asset in project["assets"] if asset["dest"].startswith("DATA/")}


def test_a_missing_default_file_names_itself_its_asset_and_the_command_that_fetches_it(monkeypatch, tmp_path):
    monkeypatch.setenv(DATA_ENV, str(tmp_path / "empty"))
    with pytest.raises(FileNotFoundError) as error:
        task_files("upos")
    message = str(error.value)
    assert str(tmp_path / "empty" / "ud_english_ewt" / "en_ewt-ud-train.conllu") in message
    assert "the project.yml asset ${vars.datasets}/ud_english_ewt/en_ewt-ud-train.conllu" in message
    assert "`python -m spacy project assets --extra`" in message and DATA_ENV in message and "--train FILE" in message


def test_the_environment_variable_names_the_data_folder(monkeypatch, tmp_path):
    data = _ewt(tmp_path / "mirror")
    monkeypatch.setenv(DATA_ENV, str(data))
    assert default_data_dir() == data
    assert task_files("upos") == (data / DEFAULTS["upos"].train, data / DEFAULTS["upos"].eval)


def test_an_explicit_folder_wins_over_the_environment_variable(monkeypatch, tmp_path):
    data = _ewt(tmp_path / "given")
    monkeypatch.setenv(DATA_ENV, str(tmp_path / "elsewhere"))
    assert task_files("upos", data_dir=data)[0] == data / "ud_english_ewt" / "en_ewt-ud-train.conllu"


def test_without_the_variable_the_data_are_the_project_assets_under_the_working_directory(monkeypatch, tmp_path):
    monkeypatch.delenv(DATA_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    assert default_data_dir() == tmp_path / "assets" / "datasets"
    assert load_project_config(ROOT)["vars"]["datasets"] == PROJECT_DATA.as_posix()


def test_every_default_file_and_the_wic_labels_are_assets_of_the_project():
    checksums = _asset_checksums()
    defaults = {name for task in DEFAULTS.values() for name in (task.train, task.eval) if name is not None}
    labels = {name.replace(".data.txt", ".gold.txt") for name in defaults if name.startswith("wic/")}
    assert not (defaults | labels) - set(checksums)


def test_the_probe_data_in_the_mirror_are_the_published_files(monkeypatch):
    mirror = _mirror()
    if not mirror.is_dir():
        pytest.skip(f"no datasets at {mirror} (set {DATA_ENV})")
    monkeypatch.setenv(DATA_ENV, str(mirror))
    checksums = _asset_checksums()
    for task in DEFAULTS:
        for path in filter(None, task_files(task)):
            name = path.relative_to(mirror).as_posix()
            assert hashlib.md5(path.read_bytes()).hexdigest() == checksums[name], name


def test_a_file_without_items_is_an_error_naming_it_never_a_score_of_nothing(tmp_path):
    from spacy_elmo.probes.task_data import load_task_data

    train = write_conllu(tmp_path / "train.conllu", tagged_sentences(5, 0))
    comments = tmp_path / "dev.conllu"
    comments.write_text("# sent_id = only a comment\n\n", encoding="utf-8")
    for max_items in (None, 3):
        with pytest.raises(ValueError, match="dev.conllu"):
            load_task_data("upos", train, comments, max_items=max_items)
