"""`usages`: the Parquet file of every use of the targets, and what it says it matched."""
import numpy as np
from typer.testing import CliRunner

from spacy_elmo.cli import app
from spacy_elmo.io import load_bilm
from spacy_elmo.usage.usages import read_usages

from ..published_head import write_published_head


def test_usages_writes_each_use_with_its_vector_and_reports_counts(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the cat sees a cat\n\na dog\nthe cat\n", encoding="utf-8")
    (tmp_path / "targets.txt").write_text("cat\ndog\n", encoding="utf-8")
    model = write_published_head(tmp_path / "model")
    result = CliRunner().invoke(app, ["usages", "--input", str(corpus), "--targets", str(tmp_path / "targets.txt"), "--output",
                                      str(tmp_path / "u.parquet"), "--model", str(model), "--max-uses", "2", "--layers", "mean"])
    assert result.exit_code == 0, result.output
    assert "matched on word forms" in result.stdout and "cat\t2 of 3 uses" in result.stdout
    found = read_usages(tmp_path / "u.parquet")
    assert found.settings.layer == "mean" and found.settings.max_uses == 2 and found.found == {"cat": 3, "dog": 1}
    bilm = load_bilm(model)
    for use, vector in zip(found.usages["cat"], found.matrix("cat")):
        [arrays] = bilm.embed([list(use.tokens)])
        np.testing.assert_allclose(vector, arrays.mean(0)[use.token_index], atol=1e-6)
    assert [u.doc_id for u in found.usages["dog"]] == ["corpus.txt:3"]


def test_usages_without_a_targets_file_is_refused(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("a cat\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["usages", "--input", str(corpus), "--targets", str(tmp_path / "none.txt"), "--output",
                                      str(tmp_path / "u.parquet")])
    assert result.exit_code == 2 and "targets file not found" in " ".join(result.output.replace("│", " ").split())


def test_usages_reads_a_gzip_corpus_as_text_and_the_old_spellings_with_a_warning(tmp_path):
    import gzip

    corpus = tmp_path / "corpus.txt.gz"
    corpus.write_bytes(gzip.compress(b"the cat sees a cat\n\nthe cat\n"))
    (tmp_path / "targets.txt").write_text("cat\n", encoding="utf-8")
    model = write_published_head(tmp_path / "model")
    result = CliRunner().invoke(app, ["usages", str(corpus), "--targets", str(tmp_path / "targets.txt"), "--output",
                                      str(tmp_path / "u.parquet"), "--model", str(model), "--layer", "mean"])
    assert result.exit_code == 0, result.output
    assert "is now --input" in result.output and "--layer is now --layers" in result.output
    found = read_usages(tmp_path / "u.parquet")
    assert found.settings.layer == "mean" and found.found == {"cat": 3}
    assert [u.doc_id for u in found.usages["cat"]] == ["corpus.txt.gz:1", "corpus.txt.gz:1", "corpus.txt.gz:3"]


def test_usages_needs_no_usage_extra(tmp_path, without_statistics):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the cat sees a cat\n", encoding="utf-8")
    (tmp_path / "targets.txt").write_text("cat\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["usages", "--input", str(corpus), "--targets", str(tmp_path / "targets.txt"), "--output",
                                      str(tmp_path / "u.parquet"), "--model", str(write_published_head(tmp_path / "model"))])
    assert result.exit_code == 0, result.output
    assert read_usages(tmp_path / "u.parquet").found == {"cat": 2}


def test_usages_from_an_embed_corpus_folder_writes_the_rows_the_text_gives(tmp_path):
    from ..embedded_folder import embed_here

    (tmp_path / "corpus").mkdir()
    (tmp_path / "corpus" / "corpus.txt").write_text("the cat sees a cat\n\na dog\nthe cat\n", encoding="utf-8")
    (tmp_path / "targets.txt").write_text("cat\ndog\n", encoding="utf-8")
    model = write_published_head(tmp_path / "model")
    embed_here(tmp_path / "corpus", tmp_path / "embedded", model, layers="top")
    written = {}
    for name, given in (("text", tmp_path / "corpus"), ("folder", tmp_path / "embedded")):
        result = CliRunner().invoke(app, ["usages", "--input", str(given), "--targets", str(tmp_path / "targets.txt"),
                                          "--output", str(tmp_path / f"{name}.parquet"), "--model", str(model)])
        assert result.exit_code == 0, result.output
        written[name] = read_usages(tmp_path / f"{name}.parquet")
    assert written["folder"].found == written["text"].found == {"cat": 3, "dog": 1}
    assert [u.doc_id for u in written["folder"].usages["cat"]] == [u.doc_id for u in written["text"].usages["cat"]]
    np.testing.assert_allclose(written["folder"].matrix("cat"), written["text"].matrix("cat"), rtol=0, atol=1e-5)
    refused = CliRunner().invoke(app, ["usages", "--input", str(tmp_path / "embedded"), "--targets", str(tmp_path / "targets.txt"),
                                       "--output", str(tmp_path / "mean.parquet"), "--layers", "mean"])
    assert refused.exit_code == 2 and "embed the corpus with --layers mean or all" in " ".join(refused.output.replace("│", " ").split())
    cut = CliRunner().invoke(app, ["usages", "--input", str(tmp_path / "embedded"), "--targets", str(tmp_path / "targets.txt"),
                                   "--output", str(tmp_path / "cut.parquet"), "--max-tokens", "10"])
    assert cut.exit_code == 2 and "give it with a text corpus" in " ".join(cut.output.replace("│", " ").split())
