import shutil

import pytest
from spacy.tokens import DocBin
from spacy.vocab import Vocab

from lab.corpus import convert_corpus


CONLLU = """# sent_id = 1
# text = I can't go.
1\tI\tI\tPRON\tPRP\t_\t3\tnsubj\t_\t_
2-3\tcan't\t_\t_\t_\t_\t_\t_\t_\t_
2\tca\tcan\tAUX\tMD\t_\t4\taux\t_\t_
3\tn't\tnot\tPART\tRB\t_\t4\tadvmod\t_\t_
4\tgo\tgo\tVERB\tVB\t_\t0\troot\t_\tSpaceAfter=No
4.1\tgone\t_\t_\t_\t_\t_\t_\t_\t_
5\t.\t.\tPUNCT\t.\t_\t4\tpunct\t_\t_

# sent_id = 2
1\tYes\tyes\tINTJ\tUH\t_\t0\troot\t_\t_
"""

# IOB1 with -DOCSTART-: I- opens an entity, B- only between two entities of one type
CONLL_NER = """-DOCSTART- -X- O O

EU NNP I-NP I-ORG
rejects VBZ I-VP O
German JJ I-NP I-MISC
Peter NNP I-NP I-PER
Paul NNP I-NP B-PER
Smith NNP I-NP I-PER

Bonn NNP I-NP I-LOC
"""

WNUT = "Empire\tB-location\nState\tI-location\nrocks\tO\n\t\nok\tO\n"


def _docs(path):
    return list(DocBin().from_disk(path).get_docs(Vocab()))


def test_conllu_keeps_syntactic_words_upos_and_spaces(tmp_path):
    (tmp_path / "in.conllu").write_text(CONLLU, encoding="utf-8")
    assert convert_corpus.convert("ud", tmp_path / "in.conllu", tmp_path / "out.spacy") == (1, 2, 6)
    (doc,) = _docs(tmp_path / "out.spacy")
    assert [t.text for t in doc] == ["I", "ca", "n't", "go", ".", "Yes"]
    assert [t.tag_ for t in doc] == ["PRON", "AUX", "PART", "VERB", "PUNCT", "INTJ"]
    assert [t.pos_ for t in doc] == [t.tag_ for t in doc]
    assert [s.text for s in doc.sents] == ["I ca n't go.", "Yes"]


def test_conll_ner_iob1_and_wnut(tmp_path):
    (tmp_path / "in.txt").write_text(CONLL_NER, encoding="utf-8")
    convert_corpus.convert("ner", tmp_path / "in.txt", tmp_path / "out.spacy", n_sents=1)
    docs = _docs(tmp_path / "out.spacy")
    assert [[(e.text, e.label_) for e in d.ents] for d in docs] == [
        [("EU", "ORG"), ("German", "MISC"), ("Peter", "PER"), ("Paul Smith", "PER")],
        [("Bonn", "LOC")],
    ]
    (tmp_path / "wnut.conll").write_text(WNUT, encoding="utf-8")
    convert_corpus.convert("ner", tmp_path / "wnut.conll", tmp_path / "wnut.spacy")
    (doc,) = _docs(tmp_path / "wnut.spacy")
    assert len(list(doc.sents)) == 2 and [(e.text, e.label_) for e in doc.ents] == [("Empire State", "location")]


def test_fractions_are_seeded_nested_and_in_order():
    small, large = (convert_corpus.select_fraction(1000, f, seed=0) for f in (0.01, 0.1))
    assert len(small) == 10 and len(large) == 100
    assert set(small) <= set(large) and small == sorted(small)
    assert convert_corpus.select_fraction(1000, 0.01, seed=0) == small
    assert convert_corpus.select_fraction(1000, 0.01, seed=1) != small
    assert convert_corpus.select_fraction(5, 0.01, seed=0) != []  # at least one sentence
    with pytest.raises(ValueError):
        convert_corpus.select_fraction(10, 0.0, seed=0)


def _polarity_folder(root, n_per_label):
    for label in ("pos", "neg"):
        (root / "movie_reviews" / label).mkdir(parents=True)
        for i in range(n_per_label):
            text = f"review {i} is {label} .\n\nit's a second line , {label} .\n"
            (root / "movie_reviews" / label / f"cv{i:03d}_{label}.txt").write_text(text, encoding="utf-8")
    return root / "movie_reviews"


def test_textcat_reviews_become_docs_with_cats_and_their_lines_as_sentences(tmp_path):
    folder = _polarity_folder(tmp_path, 10)
    assert convert_corpus.convert("textcat", folder, tmp_path / "test.spacy", part="test") == (2, 4, 24)
    docs = _docs(tmp_path / "test.spacy")
    assert sorted(d.cats["pos"] for d in docs) == [0.0, 1.0]
    for doc in docs:
        label = "pos" if doc.cats["pos"] else "neg"
        assert doc.cats == {"pos": float(label == "pos"), "neg": float(label == "neg")}
        assert [s.text for s in doc.sents][1] == f"it's a second line , {label} ."
    # the zip as NLTK ships it reads the same
    archive = shutil.make_archive(str(tmp_path / "movie_reviews"), "zip", tmp_path, "movie_reviews")
    assert convert_corpus.convert("textcat", archive, tmp_path / "zip.spacy", part="test") == (2, 4, 24)
    assert [d.text for d in _docs(tmp_path / "zip.spacy")] == [d.text for d in docs]


def test_textcat_split_is_seeded_disjoint_balanced_and_fractions_nest(tmp_path):
    reviews = convert_corpus.read_polarity_reviews(_polarity_folder(tmp_path, 50))
    parts = {p: convert_corpus.split_reviews(reviews, p, seed=0) for p in ("train", "dev", "test")}
    assert [len(parts[p]) for p in parts] == [80, 10, 10]
    texts = {str(review) for part in parts.values() for review in part}
    assert len(texts) == 100  # every review in exactly one part
    assert all(sum(r[0] == "pos" for r in part) == len(part) // 2 for part in parts.values())
    assert convert_corpus.split_reviews(reviews, "dev", seed=1) != parts["dev"]
    for pct in (10, 50):
        convert_corpus.write_reviews(parts["train"], tmp_path / f"{pct}.spacy", fraction=pct / 100, seed=0)
    small, large = (_docs(tmp_path / f"{pct}.spacy") for pct in (10, 50))
    assert [len(small), len(large)] == [8, 40] and {d.text for d in small} <= {d.text for d in large}
    assert sum(d.cats["pos"] for d in small) == 4  # each label's share
    with pytest.raises(ValueError):
        convert_corpus.convert("textcat", tmp_path, tmp_path / "x.spacy")  # no part
