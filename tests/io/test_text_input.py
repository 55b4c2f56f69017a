"""The one reader of text input: plain and compressed files, folders and globs, binary files refused
by name, one policy for bytes that are not UTF-8, lines numbered from 1."""
import bz2
import gzip
import lzma
import shutil
import sys

import pytest

from spacy_elmo.io.text_input import BinaryFileError, TextDecodeError, TextStats, read_lines, text_files

LINES = ["the cat sat", "", "on the mat"]


def _bytes() -> bytes:
    return ("\n".join(LINES) + "\n").encode("utf-8")


@pytest.mark.parametrize("suffix, compress", [(".txt", bytes), (".txt.gz", gzip.compress), (".bz2", bz2.compress), (".xz", lzma.compress)])
def test_plain_and_compressed_files_read_the_same_lines_numbered_from_one(tmp_path, suffix, compress):
    path = tmp_path / f"corpus{suffix}"
    path.write_bytes(compress(_bytes()))
    lines = list(read_lines(path))
    assert [line.text for line in lines] == LINES
    assert [line.place for line in lines] == [f"corpus{suffix}:1", f"corpus{suffix}:2", f"corpus{suffix}:3"]


def test_a_folder_is_read_in_name_order_with_names_relative_to_it_and_hidden_files_left_out(tmp_path):
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "two.txt").write_text("second\n", encoding="utf-8")
    (tmp_path / "a.txt").write_text("first\r\n", encoding="utf-8")
    (tmp_path / ".hidden").write_text("never\n", encoding="utf-8")
    assert [(line.place, line.text) for line in read_lines(tmp_path)] == [("a.txt:1", "first"), ("b/two.txt:1", "second")]
    assert [name for _, name in text_files(f"{tmp_path / 'a.txt'},{tmp_path / 'b' / '*.txt'}")] == ["a.txt", "two.txt"]


def test_nothing_to_read_is_an_error_naming_the_path(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.txt"):
        list(read_lines(tmp_path / "nope.txt"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="holds no file to read"):
        list(read_lines(tmp_path / "empty"))


def test_a_binary_file_is_refused_by_name_plain_or_compressed(tmp_path):
    executable = tmp_path / "ls"
    shutil.copyfile(sys.executable, executable)
    with pytest.raises(BinaryFileError, match=r"ls: a binary file, not text"):
        list(read_lines(executable))
    packed = tmp_path / "ls.gz"
    packed.write_bytes(gzip.compress(executable.read_bytes()[:100000]))
    with pytest.raises(BinaryFileError, match=r"ls.gz: a binary file"):
        list(read_lines(packed))


def test_a_gzip_file_under_a_text_name_is_refused_not_read_as_noise(tmp_path):
    disguised = tmp_path / "corpus.txt"
    disguised.write_bytes(gzip.compress(_bytes() * 50))
    with pytest.raises(BinaryFileError, match="corpus.txt"):
        list(read_lines(disguised))


def test_a_damaged_gzip_file_is_refused_by_name(tmp_path):
    damaged = tmp_path / "corpus.gz"
    damaged.write_bytes(b"\x1f\x8b\x08\x00garbage that is not deflate")
    with pytest.raises(BinaryFileError, match="corpus.gz: not a readable .gz file"):
        list(read_lines(damaged))


def test_undecodable_bytes_are_replaced_counted_and_reported_or_refused_with_file_and_line(tmp_path):
    path = tmp_path / "latin1.txt"
    path.write_bytes("good line\ncaf\xe9 au lait\nfine\nna\xefve\n".encode("latin-1"))
    stats = TextStats()
    lines = list(read_lines(path, stats=stats))
    assert [line.text for line in lines] == ["good line", "caf\ufffd au lait", "fine", "na\ufffdve"]
    assert (stats.lines, stats.undecodable, stats.first_undecodable) == (4, 2, "latin1.txt:2")
    assert "2 of 4 lines" in stats.report() and "latin1.txt:2" in stats.report()
    assert TextStats(lines=3).report() is None
    with pytest.raises(TextDecodeError, match=r"latin1.txt:2: byte 3 is not UTF-8"):
        list(read_lines(path, strict_utf8=True))


def test_a_folder_is_read_for_its_text_files_only_and_the_others_are_counted(tmp_path):
    (tmp_path / "a.txt").write_text("first\n", encoding="utf-8")
    (tmp_path / "b.txt.gz").write_bytes(gzip.compress(b"second\n"))
    (tmp_path / "gold.csv").write_text("bank,1\n", encoding="utf-8")
    (tmp_path / "meta.json").write_text("{}\n", encoding="utf-8")
    (tmp_path / "README").write_text("about\n", encoding="utf-8")
    stats = TextStats()
    assert [line.text for line in read_lines(tmp_path, stats=stats)] == ["first", "second"]
    assert stats.skipped == 3 and "3 files in input folders not read" in stats.report()
    # a file named itself is read whatever its name
    assert [line.text for line in read_lines(tmp_path / "gold.csv")] == ["bank,1"]


def test_a_folder_without_text_files_names_what_it_holds(tmp_path):
    (tmp_path / "scores.csv").write_text("bank,1\n", encoding="utf-8")
    with pytest.raises(FileNotFoundError, match=r"holds no file to read .*\.txt.*; it holds scores\.csv"):
        text_files(tmp_path)


def test_a_reservoir_keeps_a_seeded_sample_of_at_most_its_cap_in_stream_order():
    from spacy_elmo.io.text_input import Reservoir

    def sample(n, seed):
        kept = Reservoir(5, seed)
        for i in range(n):
            kept.offer(i)
        return kept

    few = sample(3, "0:bank")
    assert few.kept() == [0, 1, 2] and few.seen == 3
    many = sample(10_000, "0:bank")
    assert many.seen == 10_000 and len(many.items) == 5
    assert many.kept() == sorted(many.kept()) and many.kept() == sample(10_000, "0:bank").kept()
    assert many.kept() != sample(10_000, "1:bank").kept()
    assert max(many.kept()) > 5  # later items get their chance
    with pytest.raises(ValueError, match="at least 1"):
        Reservoir(0, "0")
