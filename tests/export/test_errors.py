"""What cannot be exported is refused in one line, before the model is loaded or a file written."""
import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from spacy_elmo.cli import app
from spacy_elmo.export import ExportedBiLM, ExportError, export_bilm, export_model, record_path

from .exported import run_file

from ..conftest import TINY, random_bilm


def _cli(*args):
    """The command in this process (its exit code and stderr, as a shell sees them)."""
    return CliRunner().invoke(app, ["export", *map(str, args)])


@pytest.mark.parametrize(
    "args, says",
    [
        (["--to", "tflite"], "unknown format 'tflite': choose one of onnx, torchscript"),
        (["--to", "onnx", "--precision", "fp16"], "fp16 is not offered"),
        (["--to", "torchscript", "--precision", "int8"], "int8 is offered for ONNX only"),
        (["--to", "onnx", "--precision", "int4"], "unknown precision 'int4'"),
        (["--to", "onnx", "--opset", "9"], "opset 9 is outside"),
    ],
)
def test_the_command_refuses_a_request_it_cannot_meet_in_one_line(tmp_path, args, says):
    result = _cli(*args, "--model", TINY, "--output", tmp_path / "m.onnx")
    assert result.exit_code == 2
    assert says in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert list(tmp_path.iterdir()) == []


def test_a_missing_output_folder_or_model_is_a_one_line_error(tmp_path):
    missing = _cli("--to", "onnx", "--model", TINY, "--output", tmp_path / "no" / "m.onnx")
    assert missing.exit_code == 2 and "output folder not found" in missing.stderr
    no_model = _cli("--to", "onnx", "--model", tmp_path / "absent", "--output", tmp_path / "m.onnx")
    assert no_model.exit_code == 2 and "absent" in no_model.stderr
    assert len(no_model.stderr.strip().splitlines()) == 1
    folder = _cli("--to", "onnx", "--model", TINY, "--output", tmp_path)
    assert folder.exit_code == 2 and "is a folder" in folder.stderr


def test_the_command_writes_the_file_and_its_record(tmp_path):
    pytest.importorskip("onnxruntime")
    result = subprocess.run([sys.executable, "-m", "spacy_elmo", "export", "--to", "torchscript", "--model",
                             str(TINY), "--output", str(tmp_path / "tiny.pt")], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    record = json.loads(record_path(tmp_path / "tiny.pt").read_text(encoding="utf-8"))
    assert record["format"] == "torchscript" and record["char_ids"]["name"] == "bytes"
    assert run_file(tmp_path / "tiny.pt").embed([["a", "b"]])[0].shape == (3, 2, 32)


def test_an_exported_file_without_its_record_is_refused(tmp_path):
    export_bilm(random_bilm(), tmp_path / "m.pt", "torchscript", model={"name": "random"})
    record_path(tmp_path / "m.pt").unlink()
    with pytest.raises(ExportError, match="record beside the exported file is missing"):
        ExportedBiLM(tmp_path / "m.pt")


def test_int8_onnx_is_kept_only_with_its_measured_cosine_within_the_bound(tmp_path):
    pytest.importorskip("onnxruntime.quantization")
    try:
        record = export_model(None, tmp_path / "en_small.int8.onnx", "onnx", precision="int8")
    except ExportError as err:  # refused: the message carries the number that failed the bound
        assert "int8 refused" in str(err) and "below the bound 0.999" in str(err)
        assert not (tmp_path / "en_small.int8.onnx").exists()
        return
    assert record["int8"]["mean_cosine_to_fp32"] >= 0.999
    model = run_file(tmp_path / "en_small.int8.onnx")
    assert model.embed([["A", "bank", "."]])[0].shape == (3, 3, 256)


def test_a_torchscript_file_is_run_only_as_a_module_the_caller_loaded(tmp_path):
    """A TorchScript file is a program: the package loads none itself (it unpickles nothing), and
    says how to hand one over where it is trusted."""
    export_bilm(random_bilm(), tmp_path / "m.pt", "torchscript", model={"name": "random"})
    with pytest.raises(ExportError, match=r"module=torch\.jit\.load\(path\)"):
        ExportedBiLM(tmp_path / "m.pt")
    assert run_file(tmp_path / "m.pt").embed([["a", "b", "c"]])[0].shape[:2] == (3, 3)
