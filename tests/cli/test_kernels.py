"""`kernels`: where the compiled LSTM step is, whether it is built and loaded; `--build` builds it."""
import json

import pytest
from typer.testing import CliRunner

from spacy_elmo.fast import compiled
from spacy_elmo.cli import app

runner = CliRunner()


@pytest.mark.skipif(compiled._compiler() is None, reason="no C++ compiler here")
def test_kernels_reports_and_builds():
    result = runner.invoke(app, ["kernels", "--build"])
    assert result.exit_code == 0, result.output
    status = json.loads(result.stdout)
    assert status["built"] and status["loaded"] and status["failed"] is None
    assert status["library"] == str(compiled.library_path())
    assert compiled.library_path().parent == compiled.kernel_dir()


def test_kernels_build_failure_exits_1_with_the_reason(broken_compiler):
    result = runner.invoke(app, ["kernels", "--build"])
    assert result.exit_code == 1
    assert "build failed" in result.output and broken_compiler in json.loads(result.stdout)["failed"]
    result = runner.invoke(app, ["kernels"])  # the status says so afterwards
    assert result.exit_code == 0 and not json.loads(result.stdout)["built"]
