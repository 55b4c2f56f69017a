"""The record of a finished embed-corpus run: a rerun with nothing left to do returns before Ray or
Spark is even imported, and any change to the input, the settings or a shard sends it to the engine."""
import json
import os
import shutil
import sys
from dataclasses import asdict

import pytest
from typer.testing import CliRunner

from spacy_elmo.cli import app
from spacy_elmo.embed.corpus import ShardEmbedder, embed_corpus, shard_blocks
from spacy_elmo.embed.runs import FINISHED_NAME, finished_shards, open_run, write_finished
from spacy_elmo.embed.spark import embed_corpus_spark
from spacy_elmo.io import load_allennlp
from spacy_elmo.pipeline import create_pipeline


@pytest.fixture(scope="module")
def finished(tmp_path_factory, tiny_paths, tiny_sentences):
    """A folder of input (a file of 10 lines, an empty file), and an output folder of its shards,
    three of 4 rows, written by the per-shard work the engines run, with the record of a finished run."""
    root = tmp_path_factory.mktemp("finished")
    pipeline = root / "pipeline"
    create_pipeline(load_allennlp(*tiny_paths), lang="en").to_disk(pipeline)
    inputs = root / "in"
    (inputs / "b").mkdir(parents=True)
    (inputs / "a.txt").write_text("\n".join(" ".join(s) for s in tiny_sentences[:10]) + "\n", encoding="utf-8")
    (inputs / "b" / "empty.txt").write_bytes(b"")
    files, output, settings = open_run(inputs, root / "out", pipeline, layers="mix", dtype="float16", shard_rows=4)
    embedder = ShardEmbedder(str(pipeline), str(output), asdict(settings), batch_size=4, threads=1)
    blocks = {}
    for index in range(len(files.paths)):
        for item in shard_blocks(files, index, output, rows=4, strict=False):
            assert embedder.embed_item(item)["written"] == 1
            blocks[index] = blocks.get(index, 0) + 1
    write_finished(output, settings, files, blocks)
    return pipeline, inputs, output


def run_again(pipeline, inputs, output):
    files, output, settings = open_run(inputs, output, pipeline, layers="mix", dtype="float16", shard_rows=4)
    return finished_shards(output, settings, files)


def test_a_rerun_of_a_finished_run_returns_before_ray_or_spark_is_imported(finished, monkeypatch):
    pipeline, inputs, output = finished
    assert json.loads((output / FINISHED_NAME).read_text())["shards"] == [3, 0]
    monkeypatch.setitem(sys.modules, "ray", None)  # importing either engine now fails
    monkeypatch.setitem(sys.modules, "pyspark", None)
    common = dict(layers="mix", dtype="float16", shard_rows=4)
    on_ray = embed_corpus(inputs, output, pipeline, progress=None, **common)
    on_spark = embed_corpus_spark(inputs, output, pipeline, **common)
    for report in (on_ray, on_spark):
        assert (report.shards, report.skipped, report.written, report.rows, report.actors) == (3, 3, 0, 0, 0)
    args = ["embed-corpus", "--input", str(inputs), "--output", str(output), "--model", str(pipeline),
            "--layers", "mix", "--dtype", "float16", "--shard-rows", "4"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "3 shards under" in result.output and "all already done and verified" in result.output


def test_a_damaged_shard_or_changed_input_sends_the_rerun_to_the_engine(finished, tmp_path, monkeypatch):
    pipeline, inputs, original = finished
    output = tmp_path / "out"
    shutil.copytree(original, output)
    assert run_again(pipeline, inputs, output) == 3

    shard = output / "shard-00000-00001.parquet"
    data = shard.read_bytes()
    shard.write_bytes(data[:-3])
    assert run_again(pipeline, inputs, output) is None
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(ImportError, match=r"pip install spacy-elmo\[ray\]"):  # to the engine
        embed_corpus(inputs, output, pipeline, layers="mix", dtype="float16", shard_rows=4, progress=None)
    shard.write_bytes(data)
    assert run_again(pipeline, inputs, output) == 3

    # an input file rewritten in place, its size the same: its modification time tells
    stamp = os.stat(inputs / "a.txt")
    os.utime(inputs / "a.txt", ns=(stamp.st_atime_ns, stamp.st_mtime_ns + 10**9))
    try:
        assert run_again(pipeline, inputs, output) is None
    finally:
        os.utime(inputs / "a.txt", ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    assert run_again(pipeline, inputs, output) == 3

    record = json.loads((output / FINISHED_NAME).read_text())
    for changed in ({**record, "settings": {**record["settings"], "dtype": "float32"}}, {**record, "shards": [3]}, "{"):
        (output / FINISHED_NAME).write_text(changed if isinstance(changed, str) else json.dumps(changed))
        assert run_again(pipeline, inputs, output) is None
    (output / FINISHED_NAME).unlink()
    assert run_again(pipeline, inputs, output) is None


def test_a_published_pair_given_as_options_and_weights_embeds_as_its_folder_does(tmp_path, tiny_paths):
    from spacy_elmo.embed.runs import model_source

    inputs = tmp_path / "in.txt"
    inputs.write_text("The cat sat\nA bank\n", encoding="utf-8")
    pair = model_source(None, options=tiny_paths[0], weights=tiny_paths[1])
    _, _, folder = open_run(inputs, tmp_path / "a", tiny_paths[0].parent, layers="all", dtype="float32", shard_rows=4)
    files, output, by_pair = open_run(inputs, tmp_path / "b", pair, layers="all", dtype="float32", shard_rows=4)
    assert folder.weights_sha256 == by_pair.weights_sha256 and by_pair.model == tiny_paths[1].name
    embedder = ShardEmbedder(pair, str(output), asdict(by_pair), batch_size=4, threads=1)
    [item] = shard_blocks(files, 0, output, rows=4, strict=False)
    assert embedder.embed_item(item)["tokens"] == 5
    with pytest.raises(ValueError, match="not both"):
        model_source("en_small", options=tiny_paths[0], weights=tiny_paths[1])
