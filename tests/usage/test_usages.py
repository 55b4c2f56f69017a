"""Word usages: every use of the targets in a corpus, its offsets and context, a seeded cap, the
biLM's vectors, and the Parquet file."""
import numpy as np
import pytest
import spacy
from spacy.lookups import Lookups

from spacy_elmo.usage.usages import (
    collect_usages, corpus_lines, embedded_usages, find_usages, parse_layer, read_targets, read_usages, write_usages,
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


def test_without_max_tokens_a_line_longer_than_spacys_max_length_is_refused_naming_it(tmp_path):
    nlp = spacy.blank("en")
    corpus = _corpus(tmp_path, ["a bank", "a bank " * (nlp.max_length // 7 + 10)])
    with pytest.raises(ValueError, match=r"a.txt:2: a line of \d+ characters.*give --max-tokens N"):
        find_usages(nlp, corpus_lines(corpus), ["bank"], max_uses=10)


def test_uses_past_the_400th_token_are_kept_and_run_in_the_components_windows(tmp_path, tiny_bilm):
    from spacy_elmo.bilm.batching import MAX_WINDOW

    words = [f"w{i % 7}" for i in range(450)]
    words[10] = words[420] = "bank"
    found = collect_usages(tiny_bilm, _corpus(tmp_path, [" ".join(words)]), ["bank"])
    assert [u.token_index for u in found.usages["bank"]] == [10, 420] and found.settings.max_tokens is None
    first, last = (tiny_bilm.embed([words[b : b + MAX_WINDOW]])[0][-1] for b in (0, 400))
    np.testing.assert_allclose(found.vectors["bank"], np.stack([first[10], last[20]]), rtol=0, atol=1e-6)


@pytest.fixture()
def embedded(tmp_path, tiny_paths):
    """A pre-tokenized corpus (a line past 400 tokens among short ones), its embed-corpus folders
    (every layer in float32; the top layer only), and the pipeline they were made with."""
    from spacy_elmo.io import load_allennlp
    from spacy_elmo.pipeline import create_pipeline

    from ..embedded_folder import embed_here

    create_pipeline(load_allennlp(*tiny_paths), lang="en").to_disk(tmp_path / "pipeline")
    long_line = " ".join(["the bank of the river ."] * 90)  # 540 tokens, a bank every sixth
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    _corpus(corpus, LINES + [long_line] + LINES, "a.txt")
    _corpus(corpus, ["a river bank", "the bank lends"], "b.txt")
    embed_here(corpus, tmp_path / "all", tmp_path / "pipeline", shard_rows=3)
    embed_here(corpus, tmp_path / "top", tmp_path / "pipeline", layers="top", shard_rows=3)
    return corpus, tmp_path


@pytest.mark.parametrize("layer", ["top", "mean", 1])
def test_usages_from_an_embed_corpus_folder_are_those_of_the_text(embedded, tiny_bilm, layer):
    corpus, root = embedded
    targets = ["bank", "river", "absent"]
    text = collect_usages(tiny_bilm, corpus, targets, layer=layer, max_uses=40, seed=3)
    stored = embedded_usages(root / "all", targets, layer=layer, max_uses=40, seed=3)
    assert stored.found == text.found and text.found["bank"] > 40  # the cap samples the same uses
    for target in targets:
        assert [(u.doc_id, u.token_index, u.start_char, u.end_char) for u in stored.usages[target]] == [
            (u.doc_id, u.token_index, u.start_char, u.end_char) for u in text.usages[target]]
        np.testing.assert_allclose(stored.vectors[target], text.vectors[target], rtol=0, atol=1e-5)
    assert max(u.token_index for u in stored.usages["bank"]) > 400


def test_a_folder_without_the_layer_or_made_with_other_weights_is_refused(embedded, tiny_bilm):
    from spacy_elmo.embed.runs import weights_sha256

    corpus, root = embedded
    assert len(embedded_usages(root / "top", ["bank"], layer="top").usages["bank"]) == 96
    with pytest.raises(ValueError, match=r"holds layer_2 \(embed-corpus --layers top\), not what --layers mean reads"):
        embedded_usages(root / "top", ["bank"], layer="mean")
    with pytest.raises(ValueError, match="embed the corpus with --layers all or 0"):
        embedded_usages(root / "top", ["bank"], layer=0)
    assert embedded_usages(root / "all", ["bank"], weights_sha256=weights_sha256(tiny_bilm)).usages["bank"]
    with pytest.raises(ValueError, match="not with the model given"):
        embedded_usages(root / "all", ["bank"], weights_sha256="0" * 64)
    (root / "all" / "_embed-corpus" / "finished.json").unlink()
    with pytest.raises(ValueError, match="embed-corpus has not finished there"):
        embedded_usages(root / "all", ["bank"])


def test_a_finished_folder_that_lost_a_shard_or_gained_one_is_refused_naming_the_rows(embedded):
    import shutil

    _, root = embedded
    assert embedded_usages(root / "top", ["bank"]).found["bank"] == 96
    moved = root / "shard-00000-00001.parquet"
    shutil.move(root / "top" / "shard-00000-00001.parquet", moved)  # a.txt's rows 4 to 6
    with pytest.raises(ValueError, match=r"1 of the 4 shards its run wrote are missing \(the first: rows 4 to 6 of a.txt\)"):
        embedded_usages(root / "top", ["bank"])
    shutil.move(moved, root / "top" / "shard-00000-00001.parquet")
    shutil.copy(root / "top" / "shard-00001-00000.parquet", root / "top" / "shard-00002-00000.parquet")
    with pytest.raises(ValueError, match=r"holds shards its run did not write \(shard-00002-00000.parquet\)"):
        embedded_usages(root / "top", ["bank"])
