import gzip
import zipfile

import pytest
import spacy

from lab.corpus import wide_corpus



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


def test_sword_entries_read_the_compressed_module_once_per_entry(tmp_path):
    import struct
    import zlib

    block = "<w>In</w> <w>the</w> beginning. A note.".encode("utf-8")
    packed = zlib.compress(block)
    (tmp_path / "ot.bzz").write_bytes(packed)
    (tmp_path / "ot.bzs").write_bytes(struct.pack("<III", 0, len(packed), len(block)))
    # an empty entry, two verses, and a verse linked to the first one (a commentary's range)
    records = [(0, 0, 0), (0, 0, 31), (0, 32, 7), (0, 0, 31)]
    (tmp_path / "ot.bzv").write_bytes(b"".join(struct.pack("<IIH", *r) for r in records))
    assert list(wide_corpus.sword_entries(tmp_path / "ot.bzv")) == ["<w>In</w> <w>the</w> beginning.", "A note."]


def test_sword_bible_verses_run_on_and_lose_notes_headings_and_markup():
    verses = ['<chapter n="1" sID="Gen.1"/><title type="x-s">The creation</title><div sID="g1" type="x-p"/>'
              '<w lemma="strong:H0430">God</w><note placement="foot"><reference type="annotateRef">1:1 </reference>'
              'Hebrew Elohim.</note><w lemma="strong:H1254">created</w> the heavens,',
              '<l level="1" sID="g2"/>and the earth &amp; the sea.<l eID="g2"/>',
              '<div sID="g3" type="x-p"/><q marker="" who="Jesus">“Let there be light,”</q> he said.']
    assert list(wide_corpus.sword_paragraphs(verses, running=True)) == [
        "God created the heavens, and the earth & the sea.", "“Let there be light,” he said."]


def test_sword_commentary_entries_lose_verse_labels_and_references():
    notes = ['<hi type="bold">Verses 3-5</hi> <div sID="g1" type="x-p"/> God said, Let there be light, 1Jo 5:20. '
             'Light is good (see Ge 1:4; Ps 36:9).',
             'Ver. 52. Sweet water from a dark well, as in <reference osisRef="Ps.1.1">Psalm 1:1</reference>.']
    assert list(wide_corpus.sword_paragraphs(notes, running=False)) == [
        "God said, Let there be light. Light is good.", "Sweet water from a dark well, as in."]


def test_sword_commentary_drops_pointers_left_empty_by_their_references():
    note = ('The covenant is confirmed (See Scofield "<reference osisRef="Gen.9.1">Genesis 9:1</reference>") to Noah. '
            'It speaks of atonement See Scofield "<reference osisRef="Lev.16.5">Leviticus 16:5</reference>". Cf.. the law.')
    assert list(wide_corpus.sword_paragraphs([note], running=False)) == [
        "The covenant is confirmed to Noah. It speaks of atonement. Cf. the law."
    ]


def test_wml_strings_keep_story_and_dialogue_and_drop_markup_and_variables():
    cfg = ('#textdomain wesnoth-httt\n[message]\n    speaker=Konrad\n    message= _ "Master Delfador! '
           'The ""orcs"" are\ncoming."\n[/message]\n# message= _ "A comment, not a line."\n'
           '    story= _ "<i>Long ago</i>, the land was at peace." + _ " It did not last."\n'
           '    message= _ "Well done, $unit.name|!"\n    name= _ "Konrad"\n'
           '    description= _ "Elvish archers shoot well.\n\nThey live in forests." + {SPECIAL_NOTES}\n')
    assert list(wide_corpus.wml_paragraphs(cfg)) == [
        'Master Delfador! The "orcs" are coming.', "Long ago, the land was at peace. It did not last.",
        "Elvish archers shoot well.", "They live in forests."]


def test_crawl_entries_lose_keys_lua_inclusions_and_attributions():
    text = ("%%%%\n# Uniques\nAgnes\n\nThis spriggan is aged and\nweathered. She is _very_ fast.\n\n<spriggan>\n"
            "%%%%\nquote key\n\nNever again!\n    -Somebody, _A Book_. 1900.\n%%%%\nimp\n\n"
            "{{ return 'x' }}\n@The_monster@ grins.\nA small, mischievous demon.\n%%%%\n")
    assert list(wide_corpus.crawl_paragraphs(text)) == [
        "This spriggan is aged and weathered. She is very fast.", "Never again!", "A small, mischievous demon."]


def test_freeciv_help_texts_join_continuations_and_drop_markup_and_placeholders():
    text = ('; a comment, text = _("not this")\n[help_overview]\nname = _("?help:Overview")\n'
            'text = _("\\\n?help:Freeciv is a turn-based [b]strategy[/b] game, in which \\\n'
            'each player leads a \\"civilization\\".\\\n"), _("\\\nYou get %d gold.\\\n"), _("\\\n'
            'Cities grow.\\n\\nSettlers found them.\\\n")\n'
            'legend=_("England was unified by Alfred the Great of Wessex in the late\\\n 9th century.")\n'
            'helptext = "A [link section=\\"x\\"]link[/link] here."\n')
    assert list(wide_corpus.freeciv_paragraphs(text)) == [
        'Freeciv is a turn-based strategy game, in which each player leads a "civilization".', "Cities grow.",
        "Settlers found them.", "England was unified by Alfred the Great of Wessex in the late 9th century.",
        "A link here."]


def test_every_source_has_a_kind():
    kinds = [s["kind"] for s in wide_corpus.DEBIAN_SOURCES] + [v[1] for v in wide_corpus.DATASET_SOURCES.values()]
    assert set(kinds) == {"general", "technical"}
    assert all(v[1] == "general" for v in wide_corpus.DATASET_SOURCES.values())
