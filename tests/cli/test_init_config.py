"""`init-config`: the installed training configs, for a named biLM (``spacy_elmo/configs``)."""
import zipfile
from importlib import resources

import pytest
from spacy.util import load_config
from thinc.api import Config
from typer.testing import CliRunner

from spacy_elmo.cli import app
from spacy_elmo.configs import TASKS, config_text, known_shape
from spacy_elmo.layers.torch_threads import threads_for

from lab.release.package_pipeline import build_spacy_elmo_wheel

from ..training_runs import CONFIGS, ROOT, make_data, train


def _said(result) -> str:
    return " ".join(result.output.replace("│", " ").split())


@pytest.mark.parametrize("task", TASKS)
def test_it_writes_the_installed_config_with_the_named_bilm_and_its_size(task):
    result = CliRunner().invoke(app, ["init-config", task, "--model", "original"])
    assert result.exit_code == 0, result.output
    config = Config().from_str(result.output)
    assert config["paths"]["elmo"] == "original" and config["components"]["elmo"]["model"]["name"] == "original"
    model = config["components"]["elmo"]["model"]
    assert model["threads"] == 0 and model["frozen_cache_mb"] is None and config["nlp"]["before_creation"] is None
    # the header gives the original's 12 KB a token and the threads the rule gives it here
    assert "12 KB a token (3 layers x 1024 x 4 bytes)" in result.output
    assert f"gives its calls up to {threads_for(known_shape('original'))} torch thread(s)" in result.output
    # its comments speak of what the written file is, not of the checkout's configs/ or of an unset DIR
    assert "configs/" not in result.output and "DIR" not in result.output and "shipped English biLM" not in result.output
    assert "--components.elmo.model.trainable true" in result.output
    # the checkout's configs/ are the installed ones
    assert (CONFIGS / f"{task}-elmo.cfg").read_text(encoding="utf-8") == config_text(task)


def test_a_written_config_trains_with_the_bilm_it_names(tmp_path):
    data = make_data(tmp_path)
    written = tmp_path / "tagger.cfg"
    result = CliRunner().invoke(app, ["init-config", "tagger", "--model", str(data / "bilm"), "--output", str(written)])
    assert result.exit_code == 0, result.output
    assert load_config(written)["paths"]["elmo"] == str(data / "bilm")
    nlp = train(written, data, tmp_path / "out")
    assert nlp.get_pipe("elmo").bilm.config.projection_dim == 16  # the tiny biLM the config names
    assert [t.tag_ for t in nlp("They said no .")]


def test_unknown_tasks_and_models_and_a_folder_as_output_are_refused(tmp_path):
    runner = CliRunner()
    said = _said(runner.invoke(app, ["init-config", "pos"]))
    assert "unknown task 'pos'" in said and "ner, tagger, textcat" in said
    result = runner.invoke(app, ["init-config", "ner", "--model", "no-such-model"])
    assert result.exit_code == 2 and "neither an existing path nor a published model name" in _said(result)
    result = runner.invoke(app, ["init-config", "ner", "--output", str(tmp_path)])
    assert result.exit_code == 2 and "is a folder" in _said(result)
    result = runner.invoke(app, ["init-config", "ner"])
    assert result.exit_code == 0 and 'elmo = "en_small"' in result.output


def test_an_output_in_a_new_folder_is_written_and_one_that_cannot_be_is_refused(tmp_path):
    runner = CliRunner()
    written = tmp_path / "new" / "folder" / "ner.cfg"
    result = runner.invoke(app, ["init-config", "ner", "--output", str(written)])
    assert result.exit_code == 0, result.output
    assert load_config(written)["paths"]["elmo"] == "en_small"
    blocked = tmp_path / "a-file"
    blocked.write_text("", encoding="utf-8")
    result = runner.invoke(app, ["init-config", "ner", "--output", str(blocked / "ner.cfg")])
    assert result.exit_code == 2 and "cannot write" in _said(result) and "--output" in _said(result)


@pytest.mark.slow
def test_the_wheel_carries_the_configs(tmp_path):
    wheel = build_spacy_elmo_wheel(tmp_path / "dist", source=ROOT)
    with zipfile.ZipFile(wheel) as archive:
        for task in TASKS:
            assert archive.read(f"spacy_elmo/configs/{task}-elmo.cfg").decode("utf-8") == config_text(task)
    assert resources.files("spacy_elmo.configs").joinpath("ner-elmo.cfg").is_file()
