"""Training each cell of the downstream experiment (`downstream-train`): what it is asked to run."""
from pathlib import Path

from typer.testing import CliRunner

from spacy_elmo.cli import app
from spacy_elmo.downstream import comma_list

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


def test_comma_separated_lists_are_read_as_the_commands_give_them():
    assert comma_list("1, 10,,100", int) == [1, 10, 100]
    assert comma_list("upos,ner") == ["upos", "ner"]
    assert comma_list((0.5, 1.0), float) == [0.5, 1.0]


def test_an_unknown_task_or_setting_is_refused_before_any_training(tmp_path):
    result = CliRunner().invoke(app, ["downstream-train", "--input", str(tmp_path), "--output", str(tmp_path / "out"),
                                      "--configs", str(CONFIGS), "--tasks", "upos,pos", "--settings", "plain,fancy"])
    said = " ".join(result.output.replace("│", " ").split())
    assert result.exit_code == 2 and "unknown tasks or settings ['pos', 'fancy']" in said
    assert not (tmp_path / "out").exists()
