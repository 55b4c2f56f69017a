import gzip
import json
import os

import psutil
import pytest

from spacy_elmo.io.text_input import BinaryFileError, TextDecodeError
from spacy_elmo.training.corpus import Corpus, CorpusStats, file_format, resolve_paths, split_long


def test_txt_lines_are_whitespace_tokenized(tmp_path):
    path = tmp_path / "a.txt"
    path.write_text("the cat sat\n  two   words \n", encoding="utf-8")
    assert list(Corpus(path).segments()) == [["the", "cat", "sat"], ["two", "words"]]


def test_spacy_tokenizer_splits_raw_text(tmp_path):
    path = tmp_path / "a.txt"
    path.write_text("Hello, world! Don't.\n", encoding="utf-8")
    tokens = list(Corpus(path, tokenizer="en").segments())[0]
    assert tokens[:4] == ["Hello", ",", "world", "!"]
    assert "n't" in tokens


def test_bad_lines_are_skipped_and_counted_and_undecodable_bytes_replaced_as_every_command_reads_them(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_bytes(b"good line one\n\n   \n\xff\xfe broken bytes\n" + b"x" * 500 + b"\ngood line two\n")
    corpus = Corpus(path, max_line_chars=100)
    assert list(corpus.segments()) == [["good", "line", "one"], ["\ufffd\ufffd", "broken", "bytes"], ["good", "line", "two"]]
    assert corpus.stats.skipped == {"empty": 2, "too_long": 1}
    assert corpus.stats.undecodable == 1 and corpus.stats.first_undecodable == "bad.txt:4"
    assert corpus.stats.lines == 6 and corpus.stats.segments == 3 and corpus.stats.tokens == 9
    assert "skipped 3 lines" in corpus.stats.summary() and "the first: bad.txt:4" in corpus.stats.summary()
    with pytest.raises(TextDecodeError, match="bad.txt:4: byte 0 is not UTF-8"):
        list(Corpus(path, max_line_chars=100, strict_utf8=True).segments())


def test_a_byte_order_mark_opening_a_file_is_not_read_as_text(tmp_path):
    path = tmp_path / "bom.txt"
    path.write_bytes(b"\xef\xbb\xbfword one\r\n\xef\xbb\xbf\r\ntwo\r\n")
    # at the file's start only: one later in the text is the text's (and a word holding it never joins a vocabulary)
    assert list(Corpus(path).segments()) == [["word", "one"], ["\ufeff"], ["two"]]
    jsonl = tmp_path / "bom.jsonl"
    jsonl.write_bytes(b"\xef\xbb\xbf" + json.dumps({"text": "a b"}).encode("utf-8") + b"\n")
    corpus = Corpus(jsonl)
    assert list(corpus.segments()) == [["a", "b"]] and not corpus.stats.skipped


def test_a_binary_file_is_refused_by_name(tmp_path):
    path = tmp_path / "program.txt"
    path.write_bytes(b"\x7fELF\x02\x01\x01\x00\x00\x00" * 20)
    with pytest.raises(BinaryFileError, match="program.txt: a binary file"):
        list(Corpus(path).segments())


def test_jsonl_text_field_and_bad_records(tmp_path):
    path = tmp_path / "a.jsonl"
    lines = [json.dumps({"text": "one two"}), "{not json", json.dumps({"title": "no text"}), json.dumps([1, 2]), ""]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    corpus = Corpus(path)
    assert list(corpus.segments()) == [["one", "two"]]
    assert corpus.stats.skipped == {"bad_json": 1, "no_text": 2, "empty": 1}


def test_gzip_directory_and_glob(tmp_path):
    folder = tmp_path / "corpus"
    (folder / "sub").mkdir(parents=True)
    (folder / "a.txt").write_text("a b\n", encoding="utf-8")
    with gzip.open(folder / "sub" / "b.jsonl.gz", "wt", encoding="utf-8") as handle:
        handle.write(json.dumps({"text": "c d e"}) + "\n")
    assert file_format(folder / "sub" / "b.jsonl.gz") == "jsonl"
    assert list(Corpus(folder).segments()) == [["a", "b"], ["c", "d", "e"]]
    assert list(Corpus(str(folder / "**" / "*.gz")).segments()) == [["c", "d", "e"]]
    both = f"{folder / 'a.txt'},{folder / 'sub' / 'b.jsonl.gz'}"
    assert len(resolve_paths(both)) == 2
    with pytest.raises(FileNotFoundError, match="no such file, folder or glob"):
        resolve_paths(str(tmp_path / "missing*.txt"))


def test_docbin(tmp_path):
    import spacy
    from spacy.tokens import DocBin

    nlp = spacy.blank("en")
    docs = [nlp("A first doc."), nlp("  "), nlp("Second one")]
    path = tmp_path / "docs.spacy"
    DocBin(docs=docs).to_disk(path)
    corpus = Corpus(path)
    assert list(corpus.segments()) == [["A", "first", "doc", "."], ["Second", "one"]]
    assert corpus.stats.skipped == {"empty": 1}


def test_shards_partition_the_lines(tmp_path):
    path = tmp_path / "a.txt"
    path.write_text("".join(f"line {i}\n" for i in range(10)), encoding="utf-8")
    corpus = Corpus(path)
    shards = [list(corpus.segments(CorpusStats(), shard=r, n_shards=3)) for r in range(3)]
    assert [s[1] for shard in shards for s in shard] == [str(i) for i in range(10)]
    assert all(shards)


def two_ranks_reads(corpus, files=None):
    """Each of two ranks' lines and the byte ranges it read, as two torchrun ranks would."""
    found = []
    for rank in range(2):
        corpus.reads = []
        lines = [" ".join(s) for s in corpus.segments(CorpusStats(), files=files, shard=rank, n_shards=2)]
        found.append((lines, corpus.reads))
    return found


def test_two_ranks_read_disjoint_byte_ranges_of_plain_text(tmp_path):
    lines = [f"sentence {i} " + "word " * (i % 7) for i in range(300)]
    for k in range(3):
        (tmp_path / f"part-{k}.txt").write_text("".join(f"{line.strip()}\n" for line in lines[k::3]), encoding="utf-8")
    corpus = Corpus(tmp_path)
    (lines0, reads0), (lines1, reads1) = two_ranks_reads(corpus)
    expected = [line.strip() for k in range(3) for line in lines[k::3]]
    assert lines0 + lines1 == expected and set(lines0).isdisjoint(lines1)
    total = sum(path.stat().st_size for path in corpus.files)
    read = [sum(b - a for _, a, b in reads) for reads in (reads0, reads1)]
    longest = max(len(line) for line in expected) + 1
    # each rank reads its half; they share no more than the line that straddles the cut
    assert all(total / 2 - longest <= n <= total / 2 + longest for n in read)
    spans = sorted((str(path), a, b) for path, a, b in reads0 + reads1)
    overlap = sum(max(0, spans[i][2] - spans[i + 1][1]) for i in range(len(spans) - 1) if spans[i][0] == spans[i + 1][0])
    assert overlap <= longest


def test_two_ranks_take_whole_gz_files(tmp_path):
    for k in range(4):
        with gzip.open(tmp_path / f"part-{k}.txt.gz", "wt") as handle:
            handle.write("".join(f"file {k} line {i}\n" for i in range(5 + k)))
    (lines0, reads0), (lines1, reads1) = two_ranks_reads(Corpus(tmp_path))
    assert {path.name for path, _, _ in reads0} == {"part-0.txt.gz", "part-2.txt.gz"}
    assert {path.name for path, _, _ in reads1} == {"part-1.txt.gz", "part-3.txt.gz"}
    assert sorted(lines0 + lines1) == sorted(f"file {k} line {i}" for k in range(4) for i in range(5 + k))
    # fewer compressed files than ranks: both read it, each keeping every other line
    one = Corpus(tmp_path / "part-3.txt.gz")
    (lines0, reads0), (lines1, reads1) = two_ranks_reads(one)
    assert lines0 == [f"file 3 line {i}" for i in range(0, 8, 2)] and lines1 == [f"file 3 line {i}" for i in range(1, 8, 2)]
    assert reads0 == reads1 and len(reads0) == 1


def test_split_long():
    assert list(split_long([list("abcdefg"), ["x"]], 3)) == [["a", "b", "c"], ["d", "e", "f"], ["g"], ["x"]]


@pytest.mark.slow
def test_streaming_keeps_memory_bounded(tmp_path):
    """200 MB of text, including one 20 MB line: RSS grows by far less than the file."""
    path = tmp_path / "big.txt"
    line = ("lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor " * 3).strip() + "\n"
    block = (line * ((1 << 20) // len(line))).encode("utf-8")  # about 1 MB
    with open(path, "wb") as handle:
        for i in range(200):
            handle.write(block)
            if i == 100:
                handle.write(b"y" * (20 << 20) + b"\n")
    assert os.path.getsize(path) > 200e6
    process = psutil.Process()
    corpus = Corpus(path, max_line_chars=10000)
    before = process.memory_info().rss
    peak = before
    n = 0
    for n, tokens in enumerate(corpus.segments(), 1):
        if n % 50000 == 0:
            peak = max(peak, process.memory_info().rss)
    peak = max(peak, process.memory_info().rss)
    assert n > 800_000
    assert corpus.stats.skipped == {"too_long": 1}
    assert peak - before < 60e6, f"RSS grew by {(peak - before) / 1e6:.0f} MB"


def test_auto_tokenizer_keeps_pre_tokenized_text_and_splits_raw_text_with_spacy(tmp_path):
    tokenized, raw = tmp_path / "tokenized.txt", tmp_path / "raw.txt"
    tokenized.write_text("Hello , world ! Do n't .\nThe cat ( a tabby ) sat .\n", encoding="utf-8")
    raw.write_text("Hello, world! Don't.\nThe cat (a tabby) sat on 3.5 mats.\n", encoding="utf-8")
    kept = Corpus(tokenized, tokenizer="auto", lang="en")
    assert kept.tokenizer_name == "whitespace" and "reads as pre-tokenized" in kept.tokenizer_note
    assert list(kept.segments())[0] == ["Hello", ",", "world", "!", "Do", "n't", "."]
    split = Corpus(raw, tokenizer="auto", lang="en")
    assert split.tokenizer_name == "en" and "spaCy's 'en' tokenizer: the text reads as raw" in split.tokenizer_note
    assert list(split.segments())[1] == ["The", "cat", "(", "a", "tabby", ")", "sat", "on", "3.5", "mats", "."]
    nameless = Corpus(raw, tokenizer="auto")
    assert nameless.tokenizer_name == "xx" and "set [corpus] lang" in nameless.tokenizer_note
    told = Corpus(raw, tokenizer="whitespace")
    assert told.tokenizer_name == "whitespace" and "as [corpus] tokenizer / --tokenizer says" in told.tokenizer_note


def test_attached_punctuation_tells_raw_text_from_tokenized():
    from spacy_elmo.training.corpus import RAW_SHARE, attached_share

    assert attached_share(["He said , \" yes . \"", "U.S. rates rose 3.5 %"])[0] == 0.0
    share, words = attached_share(["He said, \"yes.\"", "Rates rose (again)."])
    assert words == 6 and share > RAW_SHARE


def test_sentence_splitting_joins_wrapped_lines_into_paragraphs(tmp_path):
    path = tmp_path / "wrapped.txt"
    path.write_text("The dry period means the harvest\n  will be late. Arrivals rose\nagain this week.\n\n"
                    "A second story\nbegins here.\n", encoding="utf-8")
    corpus = Corpus(path, tokenizer="auto", lang="en", sentences="sentencizer")
    assert list(corpus.segments()) == [
        ["The", "dry", "period", "means", "the", "harvest", "will", "be", "late", "."],
        ["Arrivals", "rose", "again", "this", "week", "."],
        ["A", "second", "story", "begins", "here", "."],
    ]
    assert corpus.stats.skipped == {} and "sentences split by 'sentencizer'" in corpus.tokenizer_note
    # a pre-tokenized text is one sentence a line already: its lines are kept
    tokenized = tmp_path / "tokenized.txt"
    tokenized.write_text("one sentence here .\nand another .\n", encoding="utf-8")
    kept = Corpus(tokenized, tokenizer="auto", lang="en", sentences="sentencizer")
    assert list(kept.segments()) == [["one", "sentence", "here", "."], ["and", "another", "."]]
    assert "its lines kept as sentences" in kept.tokenizer_note


def test_a_paragraph_longer_than_the_line_limit_goes_out_in_pieces(tmp_path):
    path = tmp_path / "long.txt"
    path.write_text("".join(f"line number {i} of a long paragraph\n" for i in range(30)), encoding="utf-8")
    corpus = Corpus(path, tokenizer="whitespace", sentences="sentencizer", max_line_chars=200)
    texts = list(corpus.texts())
    assert len(texts) > 1 and all(len(t) <= 200 for t in texts)
    assert sum(len(t.split()) for t in texts) == 30 * 7


def test_auto_sentences_split_wrapped_raw_text_and_keep_the_lines_of_other_text(tmp_path):
    wrapped, per_line = tmp_path / "wrapped.txt", tmp_path / "per-line.txt"
    wrapped.write_text("Showers continued throughout the week in\nthe Bahia cocoa zone, alleviating the drought\n"
                       "since early January. Arrivals for the week\nended February 22 were high.\n", encoding="utf-8")
    per_line.write_text("What if Google Morphed Into GoogleOS?\nThe cat sat on the mat.\nIt rained, then it stopped.\n",
                        encoding="utf-8")
    joined = Corpus(wrapped, tokenizer="auto", lang="en", sentences="auto")
    assert joined.sentences == "sentencizer" and "wrapped lines" in joined.tokenizer_note
    assert [len(s) for s in joined.segments()] == [18, 10]
    kept = Corpus(per_line, tokenizer="auto", lang="en", sentences="auto")
    assert kept.sentences == "lines" and len(list(kept.segments())) == 3
    # the note says how the text was cut into sentences, as it says how it was tokenized
    assert kept.tokenizer_note.endswith("; each line a sentence (its lines do not run on into the next)")
    tokenized = tmp_path / "tokenized.txt"
    tokenized.write_text("one sentence here .\nand another .\n", encoding="utf-8")
    assert Corpus(tokenized, tokenizer="auto", sentences="auto").tokenizer_note.endswith("; each line a sentence (pre-tokenized)")


def test_replay_puts_one_general_segment_after_every_k_domain_segments_and_cycles(tmp_path):
    from spacy_elmo.training.corpus import ReplayCorpus

    domain, general = tmp_path / "domain.txt", tmp_path / "general.txt"
    domain.write_text("".join(f"d{i} x\n" for i in range(7)), encoding="utf-8")
    general.write_text("g0 y\ng1 y\n", encoding="utf-8")
    mixed = ReplayCorpus(Corpus(domain), Corpus(general), every=3)
    firsts = [tokens[0] for tokens in mixed.segments()]
    assert firsts == ["d0", "d1", "d2", "g0", "d3", "d4", "d5", "g1", "d6"]
    assert [t[0] for t in mixed.segments()] == firsts  # every epoch replays from the start
    assert mixed.files == Corpus(domain).files
    halves = [[t[0] for t in mixed.segments(shard=rank, n_shards=2)] for rank in range(2)]
    assert sorted(w for half in halves for w in half if w.startswith("d")) == [f"d{i}" for i in range(7)]
