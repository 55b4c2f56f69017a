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
