import json
import subprocess
import sys

import h5py
import numpy as np


def test_dump_json_and_txt(tmp_path, tiny_paths, tiny_sentences, tiny_expected):
    source = tmp_path / "in.json"
    source.write_text(json.dumps(tiny_sentences[:4]))
    out = tmp_path / "out.hdf5"
    options, weights = tiny_paths
    cmd = [sys.executable, "-m", "spacy_elmo", "dump", "--input", str(source), "--output", str(out)]
    subprocess.run(cmd + ["--options", str(options), "--weights", str(weights)], check=True, capture_output=True)
    with h5py.File(out, "r") as handle:
        assert sorted(handle.keys()) == ["0", "1", "2", "3"]
        for i in range(4):
            np.testing.assert_allclose(handle[str(i)][...], tiny_expected[f"layers_{i}"], atol=1e-5)
    text = tmp_path / "in.txt"
    text.write_text("The quick brown fox\n\nbank\n", encoding="utf-8")
    subprocess.run(
        cmd[:4] + ["--input", str(text), "--output", str(out), "--options", str(options), "--weights", str(weights)],
        check=True,
        capture_output=True,
    )
    with h5py.File(out, "r") as handle:
        assert [handle[k].shape for k in ("0", "1", "2")] == [(3, 4, 32), (3, 0, 32), (3, 1, 32)]


def test_dump_bad_input_is_a_clear_error(tmp_path, tiny_paths):
    source = tmp_path / "in.json"
    source.write_text(json.dumps({"not": "a list"}))
    result = subprocess.run(
        [sys.executable, "-m", "spacy_elmo", "dump", "--input", str(source), "--output", str(tmp_path / "o.hdf5"),
         "--options", str(tiny_paths[0]), "--weights", str(tiny_paths[1])],
        capture_output=True,
        text=True,
    )
    assert result.returncode != 0
    assert "list of lists of token strings" in result.stderr


def test_dump_refuses_a_binary_file_by_name_and_reads_a_gzip_file_as_text(tmp_path, tiny_paths):
    import gzip
    import shutil

    program = tmp_path / "ls"
    shutil.copyfile(sys.executable, program)
    base = [sys.executable, "-m", "spacy_elmo", "dump", "--output", str(tmp_path / "o.hdf5"),
            "--options", str(tiny_paths[0]), "--weights", str(tiny_paths[1])]
    result = subprocess.run(base + ["--input", str(program)], capture_output=True, text=True)
    assert result.returncode != 0 and "a binary file, not text" in result.stderr
    packed = tmp_path / "in.txt.gz"
    packed.write_bytes(gzip.compress(b"The quick brown fox\nbank\n"))
    subprocess.run(base + ["--input", str(packed)], check=True, capture_output=True)
    with h5py.File(tmp_path / "o.hdf5", "r") as handle:
        assert [handle[k].shape for k in ("0", "1")] == [(3, 4, 32), (3, 1, 32)]


def test_an_interrupted_dump_says_where_its_work_is_and_the_same_command_continues_it(tmp_path, tiny_paths, monkeypatch):
    from typer.testing import CliRunner

    from spacy_elmo.cli._app import app
    from spacy_elmo.io.progress import EmbedProgress

    text = tmp_path / "in.txt"
    text.write_text("".join(f"The bank {i} held the river\n" for i in range(600)), encoding="utf-8")
    out = tmp_path / "out.hdf5"
    out.write_bytes(b"an earlier file")
    args = ["dump", "--input", str(text), "--output", str(out), "--options", str(tiny_paths[0]),
            "--weights", str(tiny_paths[1]), "--batch-size", "4"]
    reached = EmbedProgress.reached
    calls = []

    def interrupted(self, tokens):
        calls.append(tokens)
        if len(calls) == 3:
            raise KeyboardInterrupt
        reached(self, tokens)

    monkeypatch.setattr(EmbedProgress, "reached", interrupted)
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 130 and "run the same command again to continue" in result.output
    said = int(result.output.split("keeps the ")[1].split(" sentences complete")[0].replace(",", ""))
    assert 0 < said < 600
    assert out.read_bytes() == b"an earlier file" and (tmp_path / "out.hdf5.partial").exists()
    monkeypatch.setattr(EmbedProgress, "reached", reached)
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0 and f"holds {said:,} complete sentences of this input and weights; continuing" in result.output
    assert "embedding 600 sentences: 3,600/3,600 tokens" in result.output
    with h5py.File(out, "r") as handle:
        assert len(handle) == 600 and handle["599"].shape == (3, 6, 32)
