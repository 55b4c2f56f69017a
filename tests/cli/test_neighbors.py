import json
import subprocess
import sys


def test_neighbors_cli_prints_contextual_and_static(tmp_path, tiny_paths):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(
        "We sat on the river bank.\nThe bank raised rates.\n\nNo match here.\nA tank rolled by.\n", encoding="utf-8"
    )
    result = subprocess.run(
        [sys.executable, "-m", "spacy_elmo", "neighbors", "--input", str(corpus), "--query",
         "I deposited cash at the bank.", "--word", "bank", "--options", str(tiny_paths[0]),
         "--weights", str(tiny_paths[1]), "--top", "2"],
        capture_output=True, text=True, check=True,
    )
    out = result.stdout
    assert "2 corpus sentences use 'bank'" in out
    assert out.count("[bank]") == 2
    static = out.split("Static (layer 0 alone), nearest words:\n")[1].splitlines()
    vocabulary = {"We", "sat", "on", "the", "river", "The", "raised", "rates", "No", "match", "here", "A", "tank",
                  "rolled", "by"}
    assert len(static) == 2 and all(line.split()[1] in vocabulary for line in static)


def test_neighbors_cli_word_not_in_query(tmp_path, tiny_paths):
    corpus = tmp_path / "c.txt"
    corpus.write_text("bank\n")
    result = subprocess.run(
        [sys.executable, "-m", "spacy_elmo", "neighbors", "--input", str(corpus), "--query", "hello there",
         "--word", "bank", "--options", str(tiny_paths[0]), "--weights", str(tiny_paths[1])],
        capture_output=True, text=True,
    )
    assert result.returncode != 0 and "not a token of the query" in result.stderr


def test_neighbors_cli_writes_what_it_printed_with_provenance(tmp_path, tiny_paths):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("We sat on the river bank.\nThe bank raised rates.\n", encoding="utf-8")
    out = tmp_path / "results" / "bank.json"
    subprocess.run(
        [sys.executable, "-m", "spacy_elmo", "neighbors", "--input", str(corpus), "--query",
         "I deposited cash at the bank.", "--word", "bank", "--options", str(tiny_paths[0]),
         "--weights", str(tiny_paths[1]), "--top", "2", "--output", str(out)],
        capture_output=True, text=True, check=True,
    )
    record = json.loads(out.read_text(encoding="utf-8"))
    assert record["word"] == "bank" and record["sentences_using_word"] == 2 and record["layer"] == "mean"
    assert [n["sentence"].split()[n["position"]] for n in record["neighbors"]] == ["bank", "bank"]
    assert len(record["static_neighbors"]) == 2
    assert "neighbors" in record["provenance"]["command"] and record["provenance"]["date"]
