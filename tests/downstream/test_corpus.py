"""Labelled files as .spacy for the downstream experiment (`downstream-corpus`): seeded, nested fractions."""
from spacy.tokens import DocBin
from spacy.vocab import Vocab
from typer.testing import CliRunner

from spacy_elmo.cli import app

NER = "".join(f"word{i}\tO\nCity{i}\tB-location\n\n" for i in range(40))


def _sentences(path):
    return [sent.text for doc in DocBin().from_disk(path).get_docs(Vocab()) for sent in doc.sents]


def test_fractions_are_nested_seeded_and_counted(tmp_path):
    source = tmp_path / "train.conll"
    source.write_text(NER, encoding="utf-8")
    pattern = str(tmp_path / "out" / "ner-train-{pct}.spacy")
    result = CliRunner().invoke(app, ["downstream-corpus", "--kind", "ner", "--input", str(source), "--output", pattern, "--fractions", "10,50,100", "--n-sents", "4"])
    assert result.exit_code == 0, result.output
    assert "ner-train-10.spacy: 1 docs, 4 sentences, 8 tokens" in result.output
    kept = {pct: _sentences(tmp_path / "out" / f"ner-train-{pct}.spacy") for pct in (10, 50, 100)}
    assert [len(kept[p]) for p in (10, 50, 100)] == [4, 20, 40]
    assert set(kept[10]) <= set(kept[50]) <= set(kept[100])
    again = CliRunner().invoke(app, ["downstream-corpus", "--kind", "ner", "--input", str(source), "--output", str(tmp_path / "again.spacy"), "--fractions", "10"])
    assert _sentences(tmp_path / "again.spacy") == kept[10]


def test_fractions_are_percentages_several_need_a_place_for_it_and_the_kind_is_known(tmp_path):
    source = tmp_path / "train.conll"
    source.write_text(NER, encoding="utf-8")
    several = CliRunner().invoke(app, ["downstream-corpus", "--kind", "ner", "--input", str(source), "--output", str(tmp_path / "x.spacy"), "--fractions", "10,100"])
    assert several.exit_code != 0 and "{pct}" in several.output
    unknown = CliRunner().invoke(app, ["downstream-corpus", "--kind", "conll", "--input", str(source), "--output", str(tmp_path / "x.spacy")])
    assert unknown.exit_code != 0 and "unknown corpus kind 'conll'" in unknown.output
    shares = CliRunner().invoke(app, ["downstream-corpus", "--kind", "ner", "--input", str(source), "--output",
                                      str(tmp_path / "{pct}.spacy"), "--fractions", "0,50,150"])
    said = " ".join(shares.output.replace("│", " ").split())
    assert shares.exit_code != 0 and "fractions are percent of the sentences, in (0, 100]: not 0, 150" in said
    assert not list(tmp_path.glob("*.spacy"))
