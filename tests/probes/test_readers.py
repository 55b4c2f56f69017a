import pytest

from spacy_elmo.probes.conllu import read_conllu
from spacy_elmo.probes.ner import entity_f1, entity_spans, read_ner_columns, to_bio
from spacy_elmo.probes.wic import read_wic
from spacy_elmo.probes.wsd import SenseUse, read_sense_uses, split_uses

from .conftest import SENSEVAL_XML, write_senseval_zip


def test_conllu_keeps_syntactic_words_and_skips_ranges_and_empty_nodes(tmp_path):
    path = tmp_path / "a.conllu"
    path.write_text(
        "# text = I don't\n1\tI\tI\tPRON\t_\t_\t0\troot\t_\t_\n2-3\tdon't\t_\t_\t_\t_\t_\t_\t_\t_\n"
        "2\tdo\tdo\tAUX\t_\t_\t0\tx\t_\t_\n3\tn't\tnot\tPART\t_\t_\t0\tx\t_\t_\n3.1\tgo\tgo\tVERB\t_\t_\t_\t_\t_\t_\n\n"
        "1\tOk\tok\tINTJ\t_\t_\t0\troot\t_\t_\n",
        encoding="utf-8",
    )
    assert read_conllu(path) == [(("I", "do", "n't"), ("PRON", "AUX", "PART")), (("Ok",), ("INTJ",))]


def test_conllu_errors_name_the_file_and_the_problem(tmp_path):
    with pytest.raises(FileNotFoundError, match="missing.conllu not found"):
        read_conllu(tmp_path / "missing.conllu")
    (tmp_path / "empty.conllu").write_text("")
    with pytest.raises(ValueError, match="empty"):
        read_conllu(tmp_path / "empty.conllu")
    (tmp_path / "comments.conllu").write_text("# only a comment\n\n")
    with pytest.raises(ValueError, match="no CoNLL-U sentences"):
        read_conllu(tmp_path / "comments.conllu")
    (tmp_path / "bad.conllu").write_text("1 I I PRON\n")
    with pytest.raises(ValueError, match="bad.conllu:1: not a CoNLL-U line"):
        read_conllu(tmp_path / "bad.conllu")


def test_iob1_becomes_bio_and_valid_bio_is_unchanged():
    assert to_bio(["I-PER", "I-PER", "O", "I-LOC", "B-LOC", "I-ORG"]) == ("B-PER", "I-PER", "O", "B-LOC", "B-LOC", "B-ORG")
    bio = ("B-PER", "I-PER", "O", "B-LOC")
    assert to_bio(bio) == bio


def test_entity_f1_counts_exact_spans_and_repairs_ill_formed_predictions():
    gold = [["B-PER", "I-PER", "O", "B-LOC"]]
    assert entity_f1(gold, gold) == 100.0
    assert entity_f1(gold, [["I-PER", "I-PER", "O", "O"]]) == pytest.approx(100 * 2 * 1 * 0.5 / 1.5)
    assert entity_f1(gold, [["O"] * 4]) == 0.0
    assert entity_spans(["B-PER", "I-LOC", "I-LOC"]) == {(0, 1, "PER")}


def test_ner_columns_read_conll2003_iob1_and_wnut_tabs(tmp_path):
    conll = tmp_path / "eng.train"
    conll.write_text(
        "-DOCSTART- -X- O O\n\nEU NNP I-NNP I-ORG\nrejects VBZ I-VP O\nGerman JJ I-NP I-MISC\n\n"
        "Peter NNP I-NP I-PER\nBlackburn NNP I-NP I-PER\n",
        encoding="utf-8",
    )
    assert read_ner_columns(conll) == [
        (("EU", "rejects", "German"), ("B-ORG", "O", "B-MISC")),
        (("Peter", "Blackburn"), ("B-PER", "I-PER")),
    ]
    wnut = tmp_path / "wnut.conll"
    wnut.write_text("@paul\tO\nLondon\tB-location\n", encoding="utf-8")
    assert read_ner_columns(wnut) == [(("@paul", "London"), ("O", "B-location"))]
    bad = tmp_path / "bad.conll"
    bad.write_text("London\tLOC\n", encoding="utf-8")
    with pytest.raises(ValueError, match="bad.conll:1: expected 'token ... tag'"):
        read_ner_columns(bad)


def test_senseval_xml_and_zip_give_tokens_head_and_sense(tmp_path):
    (tmp_path / "hard.pos").write_text(SENSEVAL_XML, encoding="utf-8")
    expected = [
        SenseUse("hard-a", "HARD1", ("it", "is", "hard", "to-reach", "."), 2),
        SenseUse("hard-a", "HARD2", ("a", "hard", "rock", "&"), 1),
    ]
    assert read_sense_uses(tmp_path / "hard.pos") == expected
    assert read_sense_uses(write_senseval_zip(tmp_path / "senseval.zip")) == expected


def test_plain_sense_format_and_its_errors(tmp_path):
    path = tmp_path / "bank.tsv"
    path.write_text("# comment\nbank\triver\t4\twe sat on the bank\n\n", encoding="utf-8")
    assert read_sense_uses(path) == [SenseUse("bank", "river", ("we", "sat", "on", "the", "bank"), 4)]
    path.write_text("bank\triver\t9\twe sat on the bank\n", encoding="utf-8")
    with pytest.raises(ValueError, match="no token at index 9"):
        read_sense_uses(path)
    path.write_text("bank river 4 we sat\n", encoding="utf-8")
    with pytest.raises(ValueError, match="expected word<TAB>sense<TAB>index<TAB>tokens"):
        read_sense_uses(path)


def test_sense_window_keeps_the_target_in_place():
    use = SenseUse("w", "s", tuple("abcdefghij"), 5)
    cut = use.window(2)
    assert cut.tokens == tuple("defgh") and cut.tokens[cut.position] == "f"
    assert SenseUse("w", "s", tuple("abc"), 0).window(1).tokens == ("a", "b")


def test_split_is_seeded_per_word_and_capped():
    uses = [SenseUse(w, f"s{i % 3}", ("x",), 0) for w in ("a", "b") for i in range(50)]
    train, test = split_uses(uses, seed=0, max_per_word=20)
    assert (len(train), len(test)) == (32, 8)
    assert {u.word for u in test} == {"a", "b"}
    assert split_uses(uses, seed=0, max_per_word=20) == (train, test)
    assert split_uses(uses, seed=1, max_per_word=20) != (train, test)


def test_wic_reads_gold_beside_data_or_a_sixth_column(tmp_path, wic_dirs):
    train_file, _, pairs = wic_dirs
    read = read_wic(train_file.parent)
    assert len(read) == 120 and read[0].first == pairs[0][0] and read[0].positions == (pairs[0][1], pairs[0][4])
    assert [p.same for p in read] == [a[2] == a[5] for a in pairs[:120]]
    six = tmp_path / "six.data.txt"
    six.write_text("play\tV\t0-1\tplay on\tthey play\tT\n", encoding="utf-8")
    assert read_wic(six)[0].same


def test_wic_word_absent_from_its_sentence_is_a_clear_error(tmp_path):
    data = tmp_path / "x.data.txt"
    data.write_text("play\tV\t0-5\tplay on\tthey play\n", encoding="utf-8")
    (tmp_path / "x.gold.txt").write_text("T\n", encoding="utf-8")
    with pytest.raises(ValueError, match="pair 1: the word 'play' is absent from its second sentence"):
        read_wic(data)
    (tmp_path / "x.gold.txt").unlink()
    with pytest.raises(FileNotFoundError, match="x.gold.txt"):
        read_wic(data)
