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
from spacy_elmo.embed.inputs import CorpusReadError
from spacy_elmo.embed.shards import RECORDS

from ..embedded_folder import embed_here
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
    assert embed_here(inputs, root / "out", pipeline, layers="mix", dtype="float16", shard_rows=4) == 3
    output = root / "out"
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


def test_a_file_removed_before_any_shard_of_it_lets_the_run_go_on_in_the_same_folder(finished, tmp_path):
    pipeline, inputs, _ = finished
    folder = tmp_path / "in"
    shutil.copytree(inputs, folder)
    (folder / "0-bad.txt.gz").write_bytes(b"\x1f\x8b not a whole archive")  # sorts first: every index shifts
    common = dict(layers="mix", dtype="float16", shard_rows=4)
    files, output, settings = open_run(folder, tmp_path / "out", pipeline, **common)
    with pytest.raises(CorpusReadError, match=r"0-bad.txt.gz: cannot be read to its end, damaged in its first 1 MiB of text"):
        list(shard_blocks(files, 0, output, rows=4, strict=False))
    # the other files' shards, as a run stopped by the bad one leaves them
    assert embed_here(folder, output, pipeline, skip=[0], finish=False, **common) == 3
    data = {p.name.replace("00001-", "00000-"): p.read_bytes() for p in output.glob("shard-*.parquet")}
    assert sorted(data) == ["shard-00000-00000.parquet", "shard-00000-00001.parquet", "shard-00000-00002.parquet"]
    (folder / "0-bad.txt.gz").unlink()
    # the listing without the bad file: a.txt is file 0 now, and its shards are renumbered to it
    assert embed_here(folder, output, pipeline, **common) == 0  # every shard found done under its new name
    assert {p.name: p.read_bytes() for p in output.glob("shard-*.parquet")} == data
    assert sorted(p.name for p in (output / RECORDS).iterdir()) == ["finished.json",
        "settings.json", *(name.replace(".parquet", ".json") for name in sorted(data))]


def test_a_file_removed_after_shards_were_made_from_it_is_refused_naming_it(finished, tmp_path):
    pipeline, inputs, original = finished
    folder, output = tmp_path / "in", tmp_path / "out"
    shutil.copytree(inputs, folder)
    shutil.copytree(original, output)
    (folder / "a.txt").unlink()
    (folder / "c.txt").write_text("another line\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"made from a.txt, which is no longer in the input; delete shard-00000-\*.parquet"):
        open_run(folder, output, pipeline, layers="mix", dtype="float16", shard_rows=4)


def test_an_empty_input_says_so_and_fails(finished, tmp_path):
    pipeline, inputs, _ = finished
    result = CliRunner().invoke(app, ["embed-corpus", "--input", str(inputs / "b" / "empty.txt"), "--output",
                                      str(tmp_path / "out"), "--model", str(pipeline)])
    assert result.exit_code == 1 and "nothing to embed: the file is empty" in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_a_folder_of_the_earlier_layout_is_refused_with_what_to_do(finished, tmp_path):
    pipeline, inputs, _ = finished
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "embed-corpus.json").write_text("{}")
    with pytest.raises(ValueError, match="an earlier embed-corpus.*embed into a new --output"):
        open_run(inputs, tmp_path / "out", pipeline, layers="mix", dtype="float16", shard_rows=4)


def test_an_actor_runs_the_bilm_on_the_threads_the_pool_was_sized_for(finished):
    from spacy_elmo.layers.bilm_model import THREADS_ATTR

    pipeline, inputs, output = finished
    _, _, settings = open_run(inputs, output, pipeline, layers="mix", dtype="float16", shard_rows=4)
    found = [node.attrs[THREADS_ATTR] for node in ShardEmbedder(str(pipeline), str(output), asdict(settings), batch_size=4,
                                                                  threads=3).elmo.model.walk() if THREADS_ATTR in node.attrs]
    assert found and set(found) == {3}  # the saved pipeline says 0: chosen for the model
