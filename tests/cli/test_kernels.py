"""`kernels`: where the compiled LSTM step is, whether it is built, verified and loaded; `--build`
builds it, saying so, and builds again one that is refused; where the fp32 products run."""
import json
import os

import pytest
from typer.testing import CliRunner

from spacy_elmo.fast import kernel_library, kernel_variants, payoff, prepacked
from spacy_elmo.cli import app

runner = CliRunner()


@pytest.mark.slow
@pytest.mark.skipif(kernel_library.compiler() is None, reason="no C++ compiler here")
def test_kernels_builds_says_so_and_builds_a_refused_library_again(monkeypatch, tmp_path):
    monkeypatch.setenv(kernel_library.DIR_ENV, str(tmp_path / "kernels"))
    result = runner.invoke(app, ["kernels", "--build"])
    assert result.exit_code == 0, result.output
    assert "compiling the LSTM step for this CPU" in result.stderr and "compiled kernels-" in result.stderr
    status = json.loads(result.stdout)
    assert status["built"] and status["verified"] and status["refused"] is None and status["failed"] is None
    assert status["library"] == str(kernel_library.library_path()) and status["loaded"]
    assert kernel_library.library_path().parent == kernel_library.kernel_dir()
    library = kernel_library.library_path()
    # a damaged copy put in its place: writing into the loaded file itself would change the code
    # this process has mapped from it (and crash a later call into it)
    damaged = library.with_name(library.name + ".damaged")
    damaged.write_bytes(library.read_bytes() + b"\0")
    os.replace(damaged, library)
    status = json.loads(runner.invoke(app, ["kernels"]).stdout)
    assert status["built"] and not status["verified"] and "SHA-256" in status["refused"]
    result = runner.invoke(app, ["kernels", "--build"])  # refused: built afresh, no --force needed
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["verified"]


def test_kernels_build_failure_exits_1_with_the_reason(broken_compiler):
    result = runner.invoke(app, ["kernels", "--build"])
    assert result.exit_code == 1
    assert "build failed" in result.output and broken_compiler in json.loads(result.stdout)["failed"]
    result = runner.invoke(app, ["kernels"])  # the status says so afterwards
    assert result.exit_code == 0 and not json.loads(result.stdout)["built"]
    assert not json.loads(result.stdout)["verified"]


def test_kernels_names_the_variant_this_cpu_runs_and_refuses_one_it_cannot(monkeypatch):
    status = json.loads(runner.invoke(app, ["kernels"]).stdout)
    assert status["variant"] == kernel_variants.chosen().name and status["chosen_by"] == "the CPU's flags"
    assert status["variants"] == kernel_variants.described() and status["variants"][status["variant"]] == "runs"
    monkeypatch.setenv(kernel_variants.ENV, "avx9")
    result = runner.invoke(app, ["kernels", "--build"])
    assert result.exit_code == 1 and "'avx9' is not a kernel variant here" in result.stderr
    assert json.loads(result.stdout)["variant"] is None


def test_kernels_says_where_the_fp32_products_run_and_with_routes_measures_them_for_the_shipped_model():
    payoff.forget_said()
    status = json.loads(runner.invoke(app, ["kernels"]).stdout)["fp32_routes"]
    assert status["onednn_available"] == prepacked.available() and status["chosen"] == []
    assert "faster by more than 10%" in status["how"]
    measured = json.loads(runner.invoke(app, ["kernels", "--routes"]).stdout)["fp32_routes"]["chosen"]
    if not prepacked.available():  # nothing to choose between: torch's route, unmeasured
        assert measured == []
        return
    assert len(measured) == 1 and measured[0]["shape"]["layers"] == 2
    for regime in ("one_sentence", "batch"):
        assert measured[0][regime]["route"] in prepacked.ROUTES and measured[0][regime]["torch_us_best"] > 0
    payoff.forget_said()


def test_kernels_measures_the_routes_of_the_model_named_and_wants_routes_for_it(tiny_paths):
    payoff.forget_said()
    refused = runner.invoke(app, ["kernels", "--model", str(tiny_paths[0].parent)])
    assert refused.exit_code != 0 and "add --routes" in " ".join(refused.output.split())
    measured = json.loads(runner.invoke(app, ["kernels", "--routes", "--model", str(tiny_paths[0].parent)]).stdout)
    chosen = measured["fp32_routes"]["chosen"]
    if prepacked.available():
        dim = json.loads(tiny_paths[0].read_text())["lstm"]["dim"]
        assert len(chosen) == 1 and chosen[0]["shape"]["dim"] == dim  # the tiny fixture's, not the shipped model's
    payoff.forget_said()
