"""embed-corpus on Spark (local[2]): the same shard files, byte for byte, as on Ray, and the resume."""
import json
import os
import sys

import pytest

pytest.importorskip("pyspark", reason="PySpark is not installed (pip install spacy-elmo[spark]); the Spark path is not tested")
pytest.importorskip("ray.data", reason="Ray Data is not installed (pip install spacy-elmo[ray]); nothing to compare Spark's shards with")

from typer.testing import CliRunner  # noqa: E402

from spacy_elmo.cli import app  # noqa: E402
from spacy_elmo.cli.convert import build_pipeline  # noqa: E402
from spacy_elmo.embed_corpus import embed_corpus  # noqa: E402
from spacy_elmo.embed_spark import embed_corpus_spark  # noqa: E402


@pytest.fixture(scope="module")
def spark():
    from pyspark.sql import SparkSession

    os.environ["PYSPARK_PYTHON"] = sys.executable  # the workers run this interpreter, with spacy_elmo
    session = (SparkSession.builder.master("local[2]").appName("spacy-elmo test")
               .config("spark.ui.enabled", "false").config("spark.driver.host", "127.0.0.1").getOrCreate())
    yield session
    session.stop()


def records(folder):
    return {path.name: json.loads(path.read_text()) for path in sorted(folder.glob("shard-*.json"))}


@pytest.mark.slow
def test_spark_writes_the_shards_ray_writes_and_resumes(spark, tmp_path, tiny_paths, tiny_sentences):
    pipeline = build_pipeline(tmp_path / "pipeline", options=tiny_paths[0], weights=tiny_paths[1], lang="en")
    folder = tmp_path / "in"
    (folder / "b").mkdir(parents=True)
    lines = [" ".join(s) for s in tiny_sentences]
    (folder / "a.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (folder / "b" / "c.txt").write_bytes(("\n".join(reversed(lines)) + "\n").encode("utf-8") + b"bad \xff\n")
    per_file = len("\n".join(lines).split("\n"))  # a token of the tiny sentences is a line break
    common = dict(shard_rows=4, batch_size=3)
    on_ray = embed_corpus(folder, tmp_path / "ray", pipeline, object_store_memory=100_000_000, progress=None, **common)
    on_spark = embed_corpus_spark(folder, tmp_path / "spark", pipeline, spark=spark, **common)
    assert (on_spark.shards, on_spark.written, on_spark.rows, on_spark.undecodable) == (
        on_ray.shards, on_ray.written, on_ray.rows, on_ray.undecodable) == (on_ray.shards, on_ray.shards, 2 * per_file + 1, 1)
    ray_records, spark_records = records(tmp_path / "ray"), records(tmp_path / "spark")
    assert len(spark_records) == on_ray.shards
    # the same Parquet bytes: the SHA-256 each shard's JSON records
    assert {k: v["sha256"] for k, v in spark_records.items()} == {k: v["sha256"] for k, v in ray_records.items()}
    assert (tmp_path / "spark" / "embed-corpus.json").read_text() == (tmp_path / "ray" / "embed-corpus.json").read_text()

    (tmp_path / "spark" / "shard-00001-00000.parquet").unlink()
    # the command, on the session that is active (getOrCreate)
    args = ["embed-corpus", "--input", str(folder), "--output", str(tmp_path / "spark"), "--model", str(pipeline),
            "--shard-rows", "4", "--batch-size", "3", "--engine", "spark"]
    again = CliRunner().invoke(app, args)
    assert again.exit_code == 0, again.output
    assert f"{on_ray.shards - 1} already done, 1 written" in again.output
    assert records(tmp_path / "spark") == spark_records
