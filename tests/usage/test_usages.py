"""Word usages: every use of the targets in a corpus, its offsets and context, a seeded cap, the
biLM's vectors, and the Parquet file."""
import numpy as np
import pytest
import spacy
from spacy.lookups import Lookups

from spacy_elmo.usage.usages import (
    collect_usages, corpus_lines, find_usages, parse_layer, read_targets, read_usages, write_usages,
)

LINES = ["The bank of the river .", "", "Two banks and a bank lend money .", "No target here ."]


def _corpus(tmp_path, lines=LINES, name="a.txt"):
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_word_forms_are_matched_with_their_offsets_line_ids_and_contexts(tmp_path):
    corpus = _corpus(tmp_path)
    result = find_usages(spacy.blank("en"), corpus_lines(corpus), ["bank", "river", "absent"], max_uses=10)
    found = result.uses
    assert result.match == "form" and result.seen == {"bank": 2, "river": 1, "absent": 0}
    assert [(u.doc_id, u.token_index) for u in found["bank"]] == [("a.txt:1", 1), ("a.txt:3", 4)]
    for use in found["bank"] + found["river"]:
        line = LINES[int(use.doc_id.split(":")[1]) - 1]
        assert line[use.start_char : use.end_char].lower() == use.target
        assert use.tokens[use.token_index].lower() == use.target
    assert found["absent"] == []


def test_lemmas_are_matched_where_the_pipeline_has_a_lemmatizer(tmp_path):
    nlp = spacy.blank("en")
    lemmatizer = nlp.add_pipe("lemmatizer", config={"mode": "lookup"})
    lookups = Lookups()
    lookups.add_table("lemma_lookup", {"banks": "bank"})
    lemmatizer.initialize(lookups=lookups)
    found = find_usages(nlp, corpus_lines(_corpus(tmp_path)), ["bank"], max_uses=10)
    assert found.match == "lemma"
    assert [u.tokens[u.token_index] for u in found.uses["bank"]] == ["bank", "banks", "bank"]


def test_a_folder_is_read_file_by_file_in_sorted_order(tmp_path):
    folder = tmp_path / "corpus"
    folder.mkdir()
    _corpus(folder, ["a bank"], "b.txt")
    (folder / "sub").mkdir()
    _corpus(folder / "sub", ["another bank"], "a.txt")
    _corpus(folder, ["hidden bank"], ".hidden")
    assert [doc_id for doc_id, _ in corpus_lines(folder)] == ["b.txt:1", "sub/a.txt:1"]
    with pytest.raises(FileNotFoundError, match="corpus not found"):
        list(corpus_lines(tmp_path / "missing"))


def test_the_cap_is_a_seeded_sample_per_target_in_corpus_order(tmp_path):
    corpus = _corpus(tmp_path, [f"bank number {i} and a river" for i in range(20)])

    def sample(targets, seed, max_uses=5):
        return find_usages(spacy.blank("en"), corpus_lines(corpus), targets, max_uses=max_uses, seed=seed)

    one = sample(["bank", "river"], 1)
    assert len(one.uses["bank"]) == 5 and one.seen["bank"] == 20 and one.uses == sample(["bank", "river"], 1).uses
    assert [u.doc_id for u in one.uses["bank"]] == sorted((u.doc_id for u in one.uses["bank"]), key=lambda d: int(d.split(":")[1]))
    assert one.uses["bank"] != sample(["bank", "river"], 2).uses["bank"]
    # a target's sample does not depend on the other targets
    assert sample(["bank"], 1).uses["bank"] == one.uses["bank"]
    with pytest.raises(ValueError):
        sample(["bank"], 1, max_uses=0)


def test_the_uses_held_are_bounded_by_the_cap_whatever_the_corpus_holds(tmp_path):
    from spacy_elmo.io import text_input

    held = []
    original = text_input.Reservoir.put

    def watched(self, place, item):
        original(self, place, item)
        held.append(len(self.items))

    corpus = _corpus(tmp_path, ["the bank " * 50] * 40)
    text_input.Reservoir.put = watched
    try:
        found = find_usages(spacy.blank("en"), corpus_lines(corpus), ["bank"], max_uses=7)
    finally:
        text_input.Reservoir.put = original
    assert found.seen["bank"] == 2_000 and len(found.uses["bank"]) == 7 and max(held) == 7
    assert len({u.doc_id for u in found.uses["bank"]}) > 1  # drawn from the whole corpus, not its start


def test_targets_that_differ_only_in_case_are_refused_everywhere(tmp_path):
    targets = tmp_path / "targets.txt"
    targets.write_text("cell\nCell\nCELL\n", encoding="utf-8")
    with pytest.raises(ValueError, match="'cell' and 'Cell' differ only in case"):
        read_targets(targets)
    with pytest.raises(ValueError, match="differ only in case"):
        find_usages(spacy.blank("en"), corpus_lines(_corpus(tmp_path)), ["bank", "Bank"], max_uses=5)
    # one spelling matches every case in the text
    found = find_usages(spacy.blank("en"), [("a:1", "Cell cell CELL")], ["Cell"], max_uses=5)
    assert found.seen == {"Cell": 3}


def test_a_layer_the_model_lacks_is_refused_naming_every_choice(tmp_path, tiny_bilm):
    with pytest.raises(ValueError) as caught:
        collect_usages(tiny_bilm, _corpus(tmp_path), ["bank"], layer="5")
    n = tiny_bilm.config.n_output_layers
    assert f"has {n} layers" in str(caught.value)
    assert all(word in str(caught.value) for word in ("'top' (the default", "'mean'", f"from 0 to {n - 1}"))


def test_vectors_are_the_chosen_layer_at_each_use(tmp_path, tiny_bilm):
    corpus = _corpus(tmp_path)
    for layer, pick in (("top", lambda a: a[-1]), ("mean", lambda a: a.mean(0)), ("0", lambda a: a[0])):
        found = collect_usages(tiny_bilm, corpus, ["bank"], layer=layer)
        assert found.settings.layer == layer and found.settings.match == "form"
        for use, vector in zip(found.usages["bank"], found.matrix("bank")):
            [arrays] = tiny_bilm.embed([list(use.tokens)])
            np.testing.assert_allclose(vector, pick(arrays)[use.token_index], atol=1e-6)
    assert found.found == {"bank": 2}
    with pytest.raises(ValueError, match="layer"):
        parse_layer("second")


def test_usages_survive_the_parquet_file(tmp_path, tiny_bilm):
    found = collect_usages(tiny_bilm, _corpus(tmp_path), ["bank", "river", "absent"], max_uses=1, seed=3, model="tiny")
    path = write_usages(found, tmp_path / "out" / "usages.parquet")
    back = read_usages(path)
    assert back.settings == found.settings and back.found == found.found
    assert back.usages == found.usages
    for target in ("bank", "river", "absent"):
        np.testing.assert_array_equal(back.matrix(target), found.matrix(target))
    assert back.matrix("absent").shape == (0, found.matrix("bank").shape[1])
    with pytest.raises(KeyError):
        back.matrix("other")
    none = read_usages(write_usages(collect_usages(tiny_bilm, _corpus(tmp_path), ["absent"]), tmp_path / "none.parquet"))
    assert none.usages == {"absent": []} and none.matrix("absent").shape == (0, found.matrix("bank").shape[1])


def test_a_parquet_file_without_usages_is_refused(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"text": ["a"]}), tmp_path / "other.parquet")
    with pytest.raises(ValueError, match="not a usages file"):
        read_usages(tmp_path / "other.parquet")


def test_targets_file_takes_the_first_field_of_each_line(tmp_path):
    path = tmp_path / "targets.txt"
    path.write_text("bank\t0.3\n\nriver\nbank\n", encoding="utf-8")
    assert read_targets(path) == ["bank", "river"]
    path.write_text("\n", encoding="utf-8")
    with pytest.raises(ValueError, match="no targets"):
        read_targets(path)


def test_without_pyarrow_the_error_says_how_to_get_it(tmp_path, tiny_bilm, monkeypatch):
    import sys

    found = collect_usages(tiny_bilm, _corpus(tmp_path), ["bank"])
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    with pytest.raises(ImportError, match="pip install pyarrow"):
        write_usages(found, tmp_path / "u.parquet")


def test_a_line_longer_than_spacys_max_length_is_read_to_its_first_tokens(tmp_path):
    from spacy_elmo.usage.usages import leading_text

    nlp = spacy.blank("en")
    text = "a bank " * (nlp.max_length // 7 + 1000)  # over nlp.max_length: spaCy alone refuses it (E088)
    assert len(text) > nlp.max_length
    corpus = _corpus(tmp_path, [text.strip(), "one more bank ."])
    found = find_usages(nlp, corpus_lines(corpus), ["bank"], max_uses=100, max_tokens=10).uses
    assert [(u.doc_id, u.token_index, u.start_char) for u in found["bank"]] == [
        *[("a.txt:1", i, 7 * (i // 2) + 2) for i in range(1, 10, 2)], ("a.txt:2", 2, 9)]
    assert found["bank"][0].tokens == ("a", "bank") * 5
    assert leading_text("one two  three " * 50, 1) == "one two" and leading_text("short", 400) == "short"
    assert len(leading_text("x" * 10**6, 4)) == 2 * 4 * 50  # no space in sight: a bounded start
