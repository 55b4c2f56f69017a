import json
import re

from typer.testing import CliRunner

from spacy_elmo.cli import app
from spacy_elmo.records.provenance import portable_path

from ..probes.conftest import (
    sense_uses, tagged_sentences, wic_pairs, write_conllu, write_plain_wsd, write_senseval_zip, write_wic,
)

runner = CliRunner()


def _squash(text: str) -> str:
    """The text without white space and the box rich draws around an error (it wraps lines anywhere)."""
    return re.sub(r"[\s│╭╮╰╯─]", "", text)


def _datasets(root):
    """A folder laid out like the default datasets directory, with tiny files."""
    ewt = root / "ud_english_ewt"
    ewt.mkdir(parents=True)
    write_conllu(ewt / "en_ewt-ud-train.conllu", tagged_sentences(60, seed=1))
    write_conllu(ewt / "en_ewt-ud-dev.conllu", tagged_sentences(20, seed=2))
    (root / "senseval2_nltk").mkdir()
    write_senseval_zip(root / "senseval2_nltk" / "senseval.zip")
    write_wic(root / "wic" / "train", "train", wic_pairs(30, seed=3))
    write_wic(root / "wic" / "test", "test", wic_pairs(10, seed=4))
    return root


def test_probe_all_tasks_on_default_paths_writes_json_table_and_plot(tmp_path, tiny_paths):
    data = _datasets(tmp_path / "datasets")
    out = tmp_path / "out"
    result = runner.invoke(app, ["probe", "--output", str(out), "--data-dir", str(data), "--options", str(tiny_paths[0]),
                                 "--weights", str(tiny_paths[1]), "--train-fraction", "1.0"])
    assert result.exit_code == 0, result.output
    record = json.loads((out / "probe.json").read_text())
    assert [t["task"] for t in record["tasks"]] == ["upos", "wsd", "wic"]
    assert record["tasks"][0]["data"]["train"].endswith("en_ewt-ud-train.conllu")
    assert record["tasks"][1]["sizes"] == {"train_uses": 1, "train_tokens": 4, "eval_uses": 1, "eval_tokens": 5}
    # the record names the model's files as a reader of the checkout finds them, never by a machine path
    assert record["model"]["source"] == f"{portable_path(tiny_paths[0])} + {portable_path(tiny_paths[1])}"
    assert not record["model"]["source"].startswith("/")
    assert record["provenance"]["command"].startswith("python -m") and record["provenance"]["cpu"]
    assert (out / "probe.png").is_file() and "| upos (accuracy) | wsd (accuracy) | wic (accuracy) |" in result.output
    assert "| layer 2 (LSTM 2) |" in (out / "probe.md").read_text()


def test_probe_one_task_with_its_files_and_a_disk_cache(tmp_path, tiny_paths):
    uses = sense_uses(40, seed=5)
    data = write_plain_wsd(tmp_path / "bank.tsv", uses)
    args = ["probe", "--task", "wsd", "--train", str(data), "--output", str(tmp_path / "out"),
            "--options", str(tiny_paths[0]), "--weights", str(tiny_paths[1]), "--cache-dir", str(tmp_path / "cache")]
    first = runner.invoke(app, args)
    assert first.exit_code == 0, first.output
    again = runner.invoke(app, args)
    assert again.exit_code == 0 and "embedding" not in again.output  # read back from the cache
    assert json.loads((tmp_path / "out" / "probe.json").read_text())["embedding"]["tokens"] == 0


def test_probe_errors_are_usage_errors_with_the_reason(tmp_path, tiny_paths):
    model = ["--options", str(tiny_paths[0]), "--weights", str(tiny_paths[1])]
    cases = [
        (["--task", "pos"], "unknown probe task pos"),
        (["--task", "upos", "--train", str(tmp_path / "none.conllu")], "none.conllu not found"),
        (["--task", "upos", "--data-dir", str(tmp_path / "none")], "--data-dir"),
        (["--task", "all", "--train", str(tmp_path)], "give one task"),
        (["--task", "upos", "--options", str(tiny_paths[0])], "--options and --weights go together"),
    ]
    (tmp_path / "bad.data.txt").write_text("play\tV\t0-9\tplay on\tthey play\tT\n", encoding="utf-8")
    cases.append((["--task", "wic", "--train", str(tmp_path / "bad.data.txt"), "--eval", str(tmp_path / "bad.data.txt")],
                  "absent from its second sentence"))
    for extra, message in cases:
        args = ["probe", "--output", str(tmp_path / "out"), *(model if "--options" not in extra else []), *extra]
        result = runner.invoke(app, args)
        assert result.exit_code == 2, (extra, result.output)
        assert _squash(message) in _squash(result.output), (extra, result.output)
    assert not (tmp_path / "out").exists()
