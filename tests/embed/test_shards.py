"""The shards' names, records and stored values: names past five digits sort in input order and read
back in order, records lie where dataset readers skip them, the layer vocabulary's columns, bfloat16."""
import numpy as np
import pyarrow as pa
import pytest

from ..embedded_folder import embed_here
from spacy_elmo.embed.shards import (
    RECORDS, check_layers, float_values, input_sha256, read_shards, select_columns, shard_done, shard_id, shard_key,
    shard_name, shard_verified, stored_values, write_shard,
)


def test_five_digit_names_are_unchanged_and_wider_numbers_count_their_digits():
    assert shard_id(1, 2) == f"{1:05d}-{2:05d}" == "00001-00002"
    assert shard_id(99999, 99999) == "99999-99999"
    assert shard_id(100000, 123456) == "f100000-f123456"
    assert shard_id(0, 10**9) == "00000-j1000000000"
    numbers = [0, 7, 99999, 100000, 999999, 1000000, 10**12, 10**25]
    ids = [shard_id(f, b) for f in numbers for b in numbers]
    # names in plain string order are (file, block) order, at every width
    assert sorted(ids, key=shard_name) == ids
    assert [shard_key(i) for i in ids] == [(f, b) for f in numbers for b in numbers]
    assert shard_key("00001-100000") == (1, 100000)  # plain digits, as earlier runs wrote wide numbers
    with pytest.raises(ValueError, match="not a shard id"):
        shard_key("00001")
    with pytest.raises(ValueError, match=r"\[0, 10\*\*26\)"):
        shard_id(10**26, 0)


def a_shard(folder, shard, rows):
    """Write shard ``shard`` holding ``rows`` (ids), each one token with a 2-wide mixed vector."""
    vectors = pa.ListArray.from_arrays(
        pa.array(list(range(len(rows) + 1)), type=pa.int32()),
        pa.FixedSizeListArray.from_arrays(pa.array([float(i) for i in range(2 * len(rows))], type=pa.float32()), 2),
    )
    table = pa.table({"id": pa.array(rows), "tokens": pa.array([["w"]] * len(rows), type=pa.list_(pa.string())), "mix": vectors})
    write_shard(folder, shard, table, rows=len(rows), tokens=len(rows), input_sha256=input_sha256(rows, ["w"] * len(rows)))


def test_shards_read_back_in_input_order_across_the_widths(tmp_path):
    for file, block in [(0, 100000), (0, 99999), (0, 2), (100000, 0), (1, 0)]:
        a_shard(tmp_path, shard_id(file, block), [f"{file}:{block}"])
    a_shard(tmp_path, "00001-100001", ["1:100001"])  # an earlier run's plain wide name
    assert [row_id for row_id, _, _ in read_shards(tmp_path)] == [
        "0:2", "0:99999", "0:100000", "1:0", "1:100001", "100000:0",
    ]


def test_an_earlier_layouts_shards_still_read_back_through_read_shards(tmp_path):
    # a_shard writes the earlier layout's layers: a list of per-token vectors
    a_shard(tmp_path, shard_id(0, 0), ["a.txt:1", "a.txt:2"])
    rows = list(read_shards(tmp_path))
    assert [row_id for row_id, _, _ in rows] == ["a.txt:1", "a.txt:2"]
    np.testing.assert_array_equal(rows[1][2], [[2.0, 3.0]])
    assert shard_verified(tmp_path, shard_id(0, 0)) and (tmp_path / RECORDS / "shard-00000-00000.json").is_file()
    with pytest.raises(ValueError, match="other input rows"):
        shard_done(tmp_path, shard_id(0, 0), input_sha256(["a.txt:1", "a.txt:2"], ["x", "w"]))
    (tmp_path / "shard-00000-00000.parquet").write_bytes(b"damaged")
    assert not shard_done(tmp_path, shard_id(0, 0), input_sha256(["a.txt:1", "a.txt:2"], ["w", "w"]))


def test_the_layer_vocabulary_names_its_columns_and_refuses_what_the_model_lacks():
    assert select_columns("all", 3) == ["layer_0", "layer_1", "layer_2"]
    assert select_columns("top", 3) == ["layer_2"]
    assert select_columns("-1", 3) == ["layer_2"]
    assert select_columns("0, 2,-1", 3) == ["layer_0", "layer_2"]
    assert select_columns("mean", 3) == ["mean"] and select_columns("mix", 3) == ["mix"]
    with pytest.raises(ValueError, match="this model has 3 layers"):
        select_columns("3", 3)
    with pytest.raises(ValueError, match="all, mix, top, mean, a layer index or a list"):
        check_layers("second")


def test_bfloat16_is_stored_as_its_sixteen_bits_and_read_back_to_float32():
    values = np.array([1.0, -2.5, 3.14159, 1e-3], dtype=np.float32)
    bits = stored_values(values, "bfloat16")
    assert bits.dtype == np.uint16
    back = float_values(bits, "bfloat16")
    assert back.dtype == np.float32
    np.testing.assert_allclose(back, values, rtol=2 ** -8)
    assert back[0] == 1.0 and back[1] == -2.5


@pytest.fixture(scope="module")
def embedded(tmp_path_factory, tiny_paths, tiny_sentences):
    """A folder embedded by the per-shard work both engines run (every layer, float32): two text
    files, one with a line longer than the biLM's window; and the tiny biLM."""
    from spacy_elmo.io import load_allennlp
    from spacy_elmo.pipeline import create_pipeline

    root = tmp_path_factory.mktemp("embedded")
    bilm = load_allennlp(*tiny_paths)
    create_pipeline(bilm, lang="en").to_disk(root / "pipeline")
    (root / "in").mkdir()
    long_line = " ".join(w for _ in range(30) for s in tiny_sentences[:3] for w in s)
    (root / "in" / "a.txt").write_text("\n".join([" ".join(s) for s in tiny_sentences[:5]] + ["", long_line]) + "\n")
    (root / "in" / "b.txt").write_text(" ".join(tiny_sentences[5]) + "\n")
    embed_here(root / "in", root / "out", root / "pipeline")
    return root / "out", bilm, long_line


def test_pandas_and_pyarrow_read_the_folder_and_one_reshape_gives_the_layers(embedded):
    import pandas as pd
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq

    from spacy_elmo.bilm.batching import windows

    output, bilm, long_line = embedded
    frame = pd.read_parquet(output)
    assert len(frame) == ds.dataset(output).count_rows() == 8
    assert list(frame.file) == ["a.txt"] * 7 + ["b.txt"] and list(frame.line) == [1, 2, 3, 4, 5, 6, 7, 1]
    width = int(pq.read_schema(next(output.glob("shard-*.parquet"))).metadata[b"spacy_elmo.width"])
    row = frame.iloc[6]
    tokens = list(row.tokens)
    assert tokens == long_line.split() and len(tokens) > 200
    assert list(row.window_starts) == [b for b, _ in windows(0, len(tokens))] and list(row.sentence_starts) == [0]
    assert [long_line[s:e] for s, e in zip(row.token_start, row.token_end)] == tokens
    top = np.asarray(row.layer_2).reshape(-1, width)  # the one line the docs give
    assert top.shape == (len(tokens), width)
    for begin, end in windows(0, len(tokens)):
        [expected] = bilm.embed([tokens[begin:end]])
        np.testing.assert_allclose(top[begin:end], expected[2], rtol=0, atol=1e-5)
    assert frame.iloc[5].tokens.size == 0 and np.asarray(frame.iloc[5].layer_0).size == 0  # the empty line


def test_float_layers_are_written_split_into_byte_streams_without_a_dictionary(embedded):
    import pyarrow.parquet as pq

    from spacy_elmo.embed.shards import parquet_bytes

    output, _, _ = embedded
    table = pq.read_table(next(output.glob("shard-*.parquet")))
    encodings = {}
    for codec, split in (("zstd", True), ("zstd", False), ("none", True)):
        metadata = pq.ParquetFile(pa.BufferReader(parquet_bytes(table, codec, split=split))).metadata.row_group(0)
        encodings[codec, split] = {metadata.column(i).path_in_schema: metadata.column(i).encodings
                                   for i in range(metadata.num_columns)}
    assert "BYTE_STREAM_SPLIT" in encodings["zstd", True]["layer_2.list.element"]
    assert "BYTE_STREAM_SPLIT" not in encodings["zstd", False]["layer_2.list.element"]
    assert "BYTE_STREAM_SPLIT" not in encodings["none", True]["layer_2.list.element"]
    for found in encodings.values():
        assert not any("DICTIONARY" in e for e in found["layer_2.list.element"])
        assert any("DICTIONARY" in e for e in found["tokens.list.element"])
