"""Shard names past five digits: they sort in input order, read back in order, and shards of an
earlier run named with plain digits resume under their name now."""
import json

import pyarrow as pa
import pytest

from spacy_elmo.embed.shards import (
    input_sha256, read_shards, shard_done, shard_id, shard_key, shard_name, shard_verified, write_shard,
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


def test_a_shard_of_an_earlier_run_under_plain_digits_resumes_under_its_name_now(tmp_path):
    rows = ["a.txt:0", "a.txt:1"]
    a_shard(tmp_path, "00003-100000", rows)
    data = (tmp_path / "shard-00003-100000.parquet").read_bytes()
    shard = shard_id(3, 100000)
    assert not shard_verified(tmp_path, shard)
    assert shard_done(tmp_path, shard, input_sha256(rows, ["w", "w"]))
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"shard-{shard}.json", f"shard-{shard}.parquet"]
    assert (tmp_path / f"shard-{shard}.parquet").read_bytes() == data
    assert json.loads((tmp_path / f"shard-{shard}.json").read_text())["shard"] == shard
    assert [row_id for row_id, _, _ in read_shards(tmp_path)] == rows
    # other input rows than the shard's are refused, as under a five-digit name
    with pytest.raises(ValueError, match="other input rows"):
        shard_done(tmp_path, shard, input_sha256(rows, ["x", "w"]))
    # a damaged file is not done, whatever its name
    (tmp_path / f"shard-{shard}.parquet").write_bytes(data[:-5])
    assert not shard_done(tmp_path, shard, input_sha256(rows, ["w", "w"]))
