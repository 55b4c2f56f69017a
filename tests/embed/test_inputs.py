"""The input of embed-corpus where it lies: files, directories, globs, .gz, Parquet, line numbers and bytes that are not UTF-8."""
import gzip

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from spacy_elmo.embed.inputs import READ_CHUNK, CorpusDecodeError, CorpusReadError, file_blocks, resolve_inputs, text_blocks


@pytest.fixture()
def folder(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "a.txt").write_bytes(b"one two\r\nthree\n\nfour")
    with gzip.open(tmp_path / "sub" / "b.txt.gz", "wb") as handle:
        handle.write(b"alpha\nbad \xff\xfe bytes\nomega\n")
    (tmp_path / "_SUCCESS").write_bytes(b"")
    (tmp_path / ".hidden").write_bytes(b"not read\n")
    return tmp_path


def blocks(files, rows, strict=False):
    return [block for i in range(len(files.paths)) for block in file_blocks(files, i, rows=rows, strict=strict)]


def test_a_directory_lists_its_files_below_it_and_leaves_markers_out(folder):
    files = resolve_inputs(str(folder))
    assert files.names == ["a.txt", "sub/b.txt.gz"] and files.kind == "text"
    assert files.sizes == [(folder / "a.txt").stat().st_size, (folder / "sub" / "b.txt.gz").stat().st_size]
    assert resolve_inputs(f"file://{folder}").names == files.names  # a URI pyarrow reads
    assert resolve_inputs(str(folder / "a.txt")).names == ["a.txt"]
    assert resolve_inputs(str(folder / "*" / "*.gz")).names == ["sub/b.txt.gz"]


def test_lines_keep_their_numbers_across_blocks_and_gz_is_read_as_text(folder):
    found = blocks(resolve_inputs(str(folder)), rows=2)
    assert found == [
        (0, ["a.txt:1", "a.txt:2"], ["one two", "three"], 0),
        (2, ["a.txt:3", "a.txt:4"], ["", "four"], 0),
        (0, ["sub/b.txt.gz:1", "sub/b.txt.gz:2"], ["alpha", "bad \ufffd\ufffd bytes"], 1),
        (2, ["sub/b.txt.gz:3"], ["omega"], 0),
    ]


def test_strict_utf8_names_the_file_and_line(folder):
    with pytest.raises(CorpusDecodeError, match=r"sub/b.txt.gz:2: byte 4 is not UTF-8"):
        blocks(resolve_inputs(str(folder)), rows=2, strict=True)


def test_lines_longer_than_a_read_chunk_are_whole(tmp_path):
    long = "x " * 700_000
    (tmp_path / "long.txt").write_text(f"a\n{long}\nb", encoding="utf-8")
    [(_, _, texts, _)] = blocks(resolve_inputs(str(tmp_path)), rows=10)
    assert texts == ["a", long, "b"]


def test_a_gz_cut_after_many_lines_names_where_the_damage_lies_not_line_0(tmp_path):
    line = "a line of text that a codec can squeeze\n"
    count = 3 * READ_CHUNK // len(line)  # three read chunks of text
    whole = gzip.compress((line * count).encode("utf-8"))
    (tmp_path / "cut.txt.gz").write_bytes(whole[: len(whole) * 9 // 10])
    files = resolve_inputs(str(tmp_path))
    with pytest.raises(CorpusReadError) as caught:
        blocks(files, rows=1000)
    said = str(caught.value)
    assert said.startswith("cut.txt.gz: cannot be read to its end, damaged after line ") and "Truncated" in said
    after = int(said.split("after line ")[1].split(",")[0])
    # the whole lines read before the failing chunk: more than one chunk's worth, fewer than the file holds
    assert READ_CHUNK // len(line) <= after < count
    (tmp_path / "cut.txt.gz").write_bytes(whole[:200])
    with pytest.raises(CorpusReadError, match=r"cut.txt.gz: cannot be read to its end, damaged in its first 1 MiB of text"):
        blocks(resolve_inputs(str(tmp_path)), rows=1000)


def test_parquet_rows_keep_their_ids_or_get_file_and_row(tmp_path):
    pq.write_table(pa.table({"id": [7, 9, 11], "text": ["a b", None, "c"]}), tmp_path / "with-id.parquet")
    pq.write_table(pa.table({"text": ["x", "y"]}), tmp_path / "plain.parquet")
    files = resolve_inputs(str(tmp_path))
    assert files.kind == "parquet"
    assert blocks(files, rows=2) == [
        (0, ["plain.parquet:1", "plain.parquet:2"], ["x", "y"], 0),
        (0, [7, 9], ["a b", ""], 0),
        (2, [11], ["c"], 0),
    ]


def test_what_cannot_be_read_is_refused_naming_it(tmp_path):
    with pytest.raises(FileNotFoundError, match="no input file there"):
        resolve_inputs(str(tmp_path / "missing"))
    with pytest.raises(FileNotFoundError, match="no input file there"):
        resolve_inputs(str(tmp_path / "*.txt"))
    (tmp_path / "a.txt").write_text("a\n")
    pq.write_table(pa.table({"text": ["x"]}), tmp_path / "b.parquet")
    with pytest.raises(ValueError, match="mixes Parquet and text"):
        resolve_inputs(str(tmp_path))
    pq.write_table(pa.table({"body": ["x"]}), tmp_path / "c.parquet")
    files = resolve_inputs(str(tmp_path / "c.parquet"))
    with pytest.raises(ValueError, match=r"c.parquet: a Parquet input needs a 'text' column"):
        blocks(files, rows=2)
    with pytest.raises(ValueError, match="pyarrow cannot open this URI"):
        resolve_inputs("nosuchscheme://bucket/corpus")


def test_the_listing_changes_its_checksum_when_a_file_changes(folder):
    before = resolve_inputs(str(folder)).sha256
    (folder / "a.txt").write_bytes(b"one two\r\nthree\n\nfour more")
    assert resolve_inputs(str(folder)).sha256 != before


def test_text_blocks_of_an_empty_stream_yield_nothing():
    assert list(text_blocks(pa.BufferReader(b""), name="e", rows=3, strict=True)) == []


def test_a_uri_pyarrow_cannot_open_is_a_clear_error_naming_it():
    with pytest.raises(ValueError, match="bogus://corpus/x.txt: pyarrow cannot open this URI"):
        resolve_inputs("bogus://corpus/x.txt")


def test_a_binary_file_is_refused_by_name(tmp_path):
    from spacy_elmo.io.text_input import BinaryFileError

    (tmp_path / "program").write_bytes(b"\x7fELF\x02\x01\x01\x00" * 64)
    with pytest.raises(BinaryFileError, match="program: a binary file, not text"):
        blocks(resolve_inputs(str(tmp_path)), rows=2)
