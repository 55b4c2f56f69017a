import gzip
import sys
import zipfile

import pytest
import spacy

from ..training_runs import script

# wide_corpus imports prepare_corpus from its own folder, as it does when run as a script
sys.modules.setdefault("prepare_corpus", script("prepare_corpus"))
wide_corpus = script("wide_corpus")


@pytest.fixture(scope="module")
def nlp():
    nlp = spacy.blank("en")
    nlp.add_pipe("sentencizer")
    return nlp


def test_html_keeps_paragraph_prose_and_drops_code_tables_headings_and_scripts():
    page = """<html><head><title>Title text</title><script>var x = 1;</script></head><body>
    <h1>A heading here</h1><div class="sphinxsidebar"><p>Sidebar words go here.</p></div>
    <p>The function returns <code>None</code> when the list is empty.</p>
    <pre>for x in range(10):\n    print(x)</pre>
    <table><tr><td>cell text that is not prose</td></tr></table>
    <ul><li>Each item is a sentence &amp; more.</li></ul></body></html>"""
    paragraphs = wide_corpus.html_paragraphs(page)
    assert paragraphs == ["The function returns None when the list is empty.", "Each item is a sentence & more."]


def test_info_drops_node_headers_menus_headings_and_examples():
    info = ("preamble\n\x1f\nFile: x.info,  Node: Top,  Next: Intro,  Up: (dir)\n\nIntro\n*****\n\n"
            "* Menu:\n\n* Intro::    The introduction.\n\n"
            "This manual describes the program, *note Usage::, in\ndetail.\n\n"
            "          $ make install\n          $ make check\n\n -- Function: frob x\n")
    assert list(wide_corpus.info_paragraphs(info)) == ["This manual describes the program, Usage, in detail."]


def test_pod_drops_commands_and_verbatim_and_resolves_codes():
    pod = "=head1 NAME\n\nUse C<< $x->y >> and L<the manual|perlfunc> for I<more> E<lt>detailE<gt>.\n\n    my $x = 1;\n"
    assert list(wide_corpus.pod_paragraphs(pod)) == ["Use $x->y and the manual for more <detail>."]


def test_dictd_entries_lose_head_pronunciation_etymology_citations_and_synonyms():
    entry = ('Coagulate \\Co*ag"u*late\\, v. t. [L. coagulatus.]\n   To cause (a liquid) to curdle;\n'
             "   as, rennet coagulates milk. --Boyle.\n   [1913 Webster]\n\n   Syn: To thicken; clot.\n")
    assert list(wide_corpus.dictd_paragraphs("Coagulate", entry)) == ["To cause (a liquid) to curdle; as, rennet coagulates milk."]
    foldoc = "Compiled HTML\n\n   <file format> A {Microsoft} file format\n   for help files, http://example.com/x.\n"
    assert list(wide_corpus.dictd_paragraphs("Compiled HTML", foldoc)) == ["A Microsoft file format for help files"]


def test_dictd_index_gives_each_entry_once_without_the_header():
    text = "header text\nApple\n   A fruit.\n"
    index = "00-database-info\tA\tM\nApple\tM\tS\napple\tM\tS\n"  # offset 12, length 18 in base64
    assert list(wide_corpus.dictd_entries(text, index)) == [("Apple", "Apple\n   A fruit.\n")]


def test_wordnet_glosses_and_fortunes():
    line = '02084071 05 n 01 dog 0 000 | a member of the genus Canis; "the dog barked all night"  \n'
    assert list(wide_corpus.wordnet_paragraphs(line)) == ["A member of the genus Canis.", "the dog barked all night"]
    assert list(wide_corpus.wordnet_paragraphs("  1 This software and database is being provided")) == []
    cookies = "A fool and his money\nare soon parted.\n\t\t-- Proverb\n%\nSecond one here.\n"
    assert list(wide_corpus.fortune_paragraphs(cookies)) == ["A fool and his money are soon parted.", "Second one here."]


def test_prose_filter_keeps_sentences_and_drops_fragments_code_and_numbers(nlp):
    paragraphs = ["The cat sat on the mat. x = foo(bar); return {a: b}; }", "1 2 3 4 5 6 7 8 9 .",
                  "Short one.", "This sentence has no end", "It is a plain sentence that reads well."]
    kept = [" ".join(t) for t in wide_corpus.prose_sentences(nlp, paragraphs)]
    assert kept == ["The cat sat on the mat .", "It is a plain sentence that reads well ."]


def test_normalised_hash_ignores_case_and_tokenization():
    assert wide_corpus.sentence_hash("I do n't know .".split()) == wide_corpus.sentence_hash(["i", "don't", "know."])
    assert wide_corpus.sentence_hash(["a", "b"]) != wide_corpus.sentence_hash(["a", "c"])


def test_filter_drops_duplicates_across_sources_and_evaluation_sentences():
    evaluation = {"EWT test": {wide_corpus.sentence_hash("He left the room .".split())}, "WiC": set()}
    filter_ = wide_corpus.Filter(evaluation)
    first = ["The sun rose .".split(), "the sun ROSE .".split(), "He left the room .".split(), "It rained .".split()]
    kept, duplicates, overlap = filter_.apply(first)
    assert kept == ["The sun rose .".split(), "It rained .".split()]
    assert duplicates == 1 and overlap == {"EWT test": 1}
    kept, duplicates, overlap = filter_.apply(["It rained .".split(), "he LEFT the room !".split(), "New text .".split()])
    # an evaluation sentence met again is a duplicate of the one already removed
    assert kept == ["New text .".split()] and duplicates == 2 and overlap == {}


def test_evaluation_hashes_read_every_set(nlp, tmp_path):
    d = tmp_path
    conllu = "# text = He left the room. Then he slept.\n1\tHe\n\n"
    for folder, name in [("ud_english_ewt", "en_ewt-ud-dev.conllu"), ("ud_english_ewt", "en_ewt-ud-test.conllu"),
                         ("ud_english_pud", "en_pud-ud-test.conllu")]:
        (d / folder).mkdir(exist_ok=True)
        (d / folder / name).write_text(conllu, encoding="utf-8")
    (d / "conll2003").mkdir()
    for split in ("testa", "testb"):
        (d / "conll2003" / f"eng.{split}").write_text("-DOCSTART- -X- O O\n\nEU NNP I-NP I-ORG\nrejects VBZ I-VP O\n\n")
    (d / "wnut17").mkdir()
    (d / "wnut17" / "emerging.test.annotated").write_text("gt\tO\n;\tO\n\n")
    for split in ("train", "dev", "test"):
        (d / "wic" / split).mkdir(parents=True)
        (d / "wic" / split / f"{split}.data.txt").write_text("hit\tV\t1-3\tWe hit Detroit .\tAn idea hit her .\n")
    (d / "senseval2_nltk").mkdir()
    with zipfile.ZipFile(d / "senseval2_nltk" / "senseval.zip", "w") as archive:
        archive.writestr("senseval/hard.pos", '<context> <wf pos="PRP">it</wf> <head><wf pos="VBZ">is</wf></head> '
                                              '<wf pos="JJ">hard</wf> <wf pos=".">.</wf> </context>')
    (d / "lm_wikitext2").mkdir()
    (d / "lm_wikitext2" / "test.txt").write_text(" = Title = \n The well @-@ known <unk> fell . It rose .\n")
    sets = wide_corpus.evaluation_hashes(nlp, d)
    h = wide_corpus.sentence_hash
    assert h("Then he slept .".split()) in sets["EWT test"] and h("He left the room . Then he slept .".split()) in sets["UD English PUD"]
    assert h(["EU", "rejects"]) in sets["CoNLL-2003 testb"] and h(["EU", "rejects"]) in sets["CoNLL-2003 testa"]
    assert h("An idea hit her .".split()) in sets["WiC"] and h("it is hard .".split()) in sets["Senseval-2"]
    assert h("It rose .".split()) in sets["WikiText-2 test"] and h(["The", "well-known", "<unk>", "fell", "."]) in sets["WikiText-2 test"]
    assert h(["gt", ";"]) in sets["WNUT17 test"]


def test_missing_package_names_the_apt_get_command():
    with pytest.raises(SystemExit, match="apt-get install no-such-package-xyz"):
        wide_corpus.installed_files(["no-such-package-xyz"], r".")


def test_oov_rate():
    assert wide_corpus.oov_rate([["a", "b"], ["c", "a"]], {"a", "b"}) == 0.25
