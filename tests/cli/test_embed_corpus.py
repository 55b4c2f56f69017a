"""`embed-corpus`'s storage dtype: `--dtype`, and its former name `--precision` for one more release."""
import pytest
import typer
from typer.testing import CliRunner

from spacy_elmo.cli import app
from spacy_elmo.cli.embed_corpus import storage_dtype


def test_the_storage_dtype_comes_from_dtype_or_its_former_name_with_a_note(capsys):
    assert storage_dtype(None, None) == "float32"
    assert storage_dtype("float16", None) == "float16"
    assert capsys.readouterr().err == ""
    assert storage_dtype(None, "float16") == "float16"
    assert "--precision is deprecated" in capsys.readouterr().err
    assert storage_dtype("float16", "float16") == "float16"
    with pytest.raises(typer.BadParameter, match="--dtype float16 and --precision float32"):
        storage_dtype("float16", "float32")


def test_a_bad_dtype_is_refused_by_the_command_under_either_name(tmp_path):
    common = ["embed-corpus", "--input", str(tmp_path / "corpus.txt"), "--output", str(tmp_path / "out")]
    new = CliRunner().invoke(app, [*common, "--dtype", "float64"])
    assert new.exit_code == 2 and "--dtype must be one of float32, float16" in new.output
    old = CliRunner().invoke(app, [*common, "--precision", "float64"])
    assert old.exit_code == 2 and "--dtype must be one of" in old.output
    assert "--precision is deprecated" in old.output and not (tmp_path / "out").exists()
