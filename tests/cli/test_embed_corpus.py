"""`embed-corpus`'s storage dtype: `--dtype`, and its former name `--precision` for one more release."""
import typer
from typer.testing import CliRunner

from spacy_elmo.cli import app
from spacy_elmo.cli._vocabulary import modernize


def test_the_former_name_of_dtype_is_read_as_dtype_with_a_warning(capsys):
    params = typer.main.get_command(app).commands["embed-corpus"].params
    assert modernize("embed-corpus", ["--input", "c.txt", "--precision", "float16"], params) == [
        "--input", "c.txt", "--dtype", "float16",
    ]
    assert "--precision is now --dtype" in capsys.readouterr().err
    assert modernize("embed-corpus", ["--precision=float16"], params) == ["--dtype=float16"]


def test_a_bad_dtype_is_refused_by_the_command_under_either_name(tmp_path):
    common = ["embed-corpus", "--input", str(tmp_path / "corpus.txt"), "--output", str(tmp_path / "out")]
    new = CliRunner().invoke(app, [*common, "--dtype", "float64"])
    assert new.exit_code == 2 and "--dtype must be one of float32, float16, bfloat16" in new.output
    old = CliRunner().invoke(app, [*common, "--precision", "float64"])
    assert old.exit_code == 2 and "--dtype must be one of" in old.output
    assert "--precision is now --dtype" in " ".join(old.output.split()) and not (tmp_path / "out").exists()
