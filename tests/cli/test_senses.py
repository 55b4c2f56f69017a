"""`senses`: a word's uses clustered by substitutes, printed and written as JSON."""
import json

from typer.testing import CliRunner

from spacy_elmo.cli import app
from spacy_elmo.io.loading import load_lm_head
from spacy_elmo.usage.senses import SenseSettings, induce_senses

from ..published_head import write_published_head

LINES = ["the cat sees a bird", "a big cat likes fish", "the dog sees a cat", "a red fish", "the cat sees a bird"]


def test_senses_prints_and_writes_the_libraries_senses(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    model = write_published_head(tmp_path / "model")
    out = tmp_path / "senses.json"
    result = CliRunner().invoke(app, ["senses", "--input", str(corpus), "--word", "cat", "--model", str(model), "--senses", "2",
                                      "--top", "3", "--output", str(out)])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("4 of 4 uses of 'cat' kept (word forms matched; at most 200, seed 0), 2 senses, numbered by size")
    written = json.loads(out.read_text(encoding="utf-8"))
    bilm, head = load_lm_head(model)
    contexts = [(line.split(), line.split().index("cat")) for line in LINES if "cat" in line.split()]
    expected = induce_senses(bilm, head, contexts, SenseSettings(n_clusters=2, top=3))
    assert [u["sense"] for u in written["uses"]] == expected.labels.tolist()
    assert [s["members"] for s in written["senses"]] == [list(s.members) for s in expected.senses]
    assert [u["doc_id"] for u in written["uses"]] == ["corpus.txt:1", "corpus.txt:2", "corpus.txt:3", "corpus.txt:5"]
    assert "[cat]" in result.stdout
    # senses are printed 0, 1, ... from the largest, each with "1 use" or "N uses"
    printed = [line for line in result.stdout.splitlines() if line.startswith("sense ")]
    sizes = [s["size"] for s in written["senses"]]
    assert [line.split(" (")[0] for line in printed] == ["sense 0", "sense 1"] and sizes == sorted(sizes, reverse=True)
    assert all(f"({n} use{'s' if n != 1 else ''})" in line for line, n in zip(printed, sizes))
    assert written["uses_seen"] == 4 and written["uses_kept"] == 4


def test_senses_of_a_word_the_corpus_lacks_is_refused(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("a dog\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["senses", "--input", str(corpus), "--word", "cat", "--model", str(write_published_head(tmp_path / "m"))])
    assert result.exit_code == 2 and "no use of 'cat'" in " ".join(result.output.replace("│", " ").split())


def test_without_the_usage_extra_senses_stops_with_the_line_that_installs_it(tmp_path, without_statistics):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["senses", "--input", str(corpus), "--word", "cat", "--model", str(write_published_head(tmp_path / "m"))])
    assert result.exit_code == 1 and result.stdout == ""
    [line] = result.stderr.splitlines()
    assert "scipy and scikit-learn" in line and line.endswith("pip install 'spacy-elmo[usage]'")


def test_senses_reads_an_embed_corpus_folders_lines_as_the_text(tmp_path):
    from ..embedded_folder import embed_here

    (tmp_path / "corpus").mkdir()
    (tmp_path / "corpus" / "corpus.txt").write_text("\n".join(LINES) + "\n", encoding="utf-8")
    model = write_published_head(tmp_path / "model")
    embed_here(tmp_path / "corpus", tmp_path / "embedded", model, layers="top")
    said = {}
    for given in ("corpus", "embedded"):
        result = CliRunner().invoke(app, ["senses", "--input", str(tmp_path / given), "--word", "cat", "--model", str(model),
                                          "--senses", "2", "--top", "3", "--output", str(tmp_path / f"{given}.json")])
        assert result.exit_code == 0, result.output
        said[given] = json.loads((tmp_path / f"{given}.json").read_text(encoding="utf-8"))
    assert said["embedded"]["uses"] == said["corpus"]["uses"] and said["embedded"]["senses"] == said["corpus"]["senses"]


def test_senses_from_an_embed_corpus_folder_give_the_uses_offsets_in_the_input_line(tmp_path):
    from ..embedded_folder import embed_here

    # a leading space, runs of spaces and a tab, as WikiText and Gutenberg lines have them
    lines = [" the cat  sees a bird", "a big\tcat likes fish", "the dog sees   a cat", "a red fish", "  the cat sees a bird"]
    (tmp_path / "corpus").mkdir()
    (tmp_path / "corpus" / "corpus.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    model = write_published_head(tmp_path / "model")
    embed_here(tmp_path / "corpus", tmp_path / "embedded", model, layers="top")
    out = tmp_path / "embedded.json"
    result = CliRunner().invoke(app, ["senses", "--input", str(tmp_path / "embedded"), "--word", "cat", "--model", str(model),
                                      "--senses", "2", "--top", "3", "--output", str(out)])
    assert result.exit_code == 0, result.output
    uses = json.loads(out.read_text(encoding="utf-8"))["uses"]
    assert len(uses) == 4
    for use in uses:
        line = lines[int(use["doc_id"].rsplit(":", 1)[1]) - 1]
        assert line[use["start_char"]:use["end_char"]] == "cat", (use, line)
