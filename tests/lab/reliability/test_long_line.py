"""The long-line run: one line without a newline through the text commands, each in its own
interpreter with its own peak memory, judged by what each command should do with it."""
import json

from lab.reliability.long_line import TEXTS, long_line, main

from ...conftest import DATA


def test_the_line_has_the_asked_size_and_no_newline():
    line = long_line(TEXTS, 100_003)
    assert len(line) == 100_003 and "\n" not in line and line.count(" ") > 10_000


def test_a_command_that_runs_the_line_and_one_that_refuses_it_are_recorded_with_their_own_peaks(tmp_path):
    output = tmp_path / "long-line.json"
    code = main(["--model", str(DATA / "allennlp" / "tiny"), "--bytes", "60000", "--commands", "usages,evaluate",
                 "--output", str(output)])
    record = json.loads(output.read_text(encoding="utf-8"))
    usages, evaluate = record["commands"]["usages"], record["commands"]["evaluate"]
    assert code == 0 and record["passed"] and record["newlines"] == 0 and record["line_characters"] == 60_000
    assert usages["outcome"] == "ran" and usages["exit_code"] == 0 and 50 < usages["peak_mb"] < 2048
    # the tiny pair has no softmax: evaluate refuses in one line, which it may
    assert evaluate["outcome"] == "refused" and evaluate["message"].startswith("Error: ") and "softmax" in evaluate["message"]
    assert record["provenance"]["model"]["weights_sha256"]
