"""embed-corpus on Ray: a local Ray, a real two-node cluster on 127.0.0.1, a killed worker and the resume."""
import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("ray.data")

from typer.testing import CliRunner  # noqa: E402

from spacy_elmo.cli import app  # noqa: E402
from spacy_elmo.cli.convert import build_pipeline  # noqa: E402
from spacy_elmo.cli.dump import read_sentences  # noqa: E402
from spacy_elmo.embed_corpus import KILL_MARKER_ENV, embed_corpus  # noqa: E402
from spacy_elmo.embed_shards import read_shards, shard_done, whitespace_tokens  # noqa: E402
from spacy_elmo.io import load_bilm  # noqa: E402

OBJECT_STORE = 100_000_000
# float32 sums over other batches change the last bits: the fast path's contract (load_bilm) is 2e-6
DUMP_TOLERANCE = 2e-6


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, tiny_paths, tiny_sentences):
    """A pipeline directory of the tiny biLM, and a text corpus of distinct lines (one empty)."""
    root = tmp_path_factory.mktemp("embed-corpus")
    pipeline = build_pipeline(root / "pipeline", options=tiny_paths[0], weights=tiny_paths[1])
    lines = [" ".join(s) for s in tiny_sentences] + ["", "  the   bank of the  river  "]
    lines += [f"{line} again {i}" for i, line in enumerate(lines[:10])]
    text = root / "corpus.txt"
    text.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return pipeline, text


@pytest.fixture(scope="module")
def dumped(corpus, tiny_paths):
    """What `dump` writes for the corpus, read back: one (L+1, n_tokens, width) array per line."""
    import h5py

    _, text = corpus
    out = text.with_suffix(".hdf5")
    args = ["dump", "--input", str(text), "--output", str(out), "--options", str(tiny_paths[0]), "--weights", str(tiny_paths[1])]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    with h5py.File(out, "r") as handle:
        return [handle[str(i)][...] for i in range(len(handle))]


def assert_matches_dump(output, dumped, corpus_text):
    rows = list(read_shards(output))
    sentences = read_sentences(corpus_text)
    assert [row_id for row_id, _, _ in rows] == list(range(len(dumped)))
    assert [tokens for _, tokens, _ in rows] == sentences
    for (_, _, layers), expected in zip(rows, dumped):
        assert layers.dtype == np.float32 and layers.shape == expected.shape
        np.testing.assert_allclose(layers, expected, rtol=0, atol=DUMP_TOLERANCE)


def test_tokens_and_offsets_are_dumps_split():
    assert whitespace_tokens("  the   bank ") == (["the", "bank"], [2, 8], [5, 12])
    assert whitespace_tokens("") == ([], [], [])


@pytest.mark.slow
def test_a_local_ray_started_by_the_function_matches_dump(corpus, dumped, tmp_path):
    import pyarrow.parquet as pq

    pipeline, text = corpus
    report = embed_corpus(text, tmp_path / "out", pipeline, actors=2, shard_rows=8, object_store_memory=OBJECT_STORE)
    assert (report.shards, report.skipped, report.written, report.rows) == (4, 0, 4, len(dumped))
    assert_matches_dump(tmp_path / "out", dumped, text)
    metadata = pq.read_schema(tmp_path / "out" / "shard-00000.parquet").metadata
    recorded = json.loads((pipeline / "elmo" / "model" / "config.json").read_text())["weights_sha256"]
    assert metadata[b"spacy_elmo.weights_sha256"].decode() == recorded
    assert metadata[b"spacy_elmo.model"] == b"pipeline"
    row = pq.read_table(tmp_path / "out" / "shard-00002.parquet").slice(4, 1).to_pylist()[0]
    line = text.read_text(encoding="utf-8").splitlines()[20]
    assert [line[s:e] for s, e in zip(row["token_start"], row["token_end"])] == row["tokens"] == line.split()

    again = embed_corpus(text, tmp_path / "out", pipeline, shard_rows=8)
    assert (again.skipped, again.written) == (4, 0)  # no Ray needed: every shard is verified


@pytest.mark.slow
def test_float16_mix_through_the_command(corpus, dumped, tmp_path):
    pipeline, text = corpus
    args = ["embed-corpus", "--input", str(text), "--output", str(tmp_path / "out"), "--model", str(pipeline),
            "--layers", "mix", "--precision", "float16", "--shard-rows", "16"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "2 written" in result.output
    rows = list(read_shards(tmp_path / "out"))
    for (_, _, mixed), expected in zip(rows, dumped):
        assert mixed.dtype == np.float16 and mixed.shape == expected.shape[1:]
        np.testing.assert_allclose(mixed.astype(np.float32), expected.mean(axis=0), rtol=1e-3, atol=1e-3)
    other = CliRunner().invoke(app, args[:-4] + ["--precision", "float32", "--shard-rows", "16"])
    assert other.exit_code == 1 and "other settings (dtype)" in other.output


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.slow
def test_a_two_node_cluster_on_localhost_matches_dump(corpus, dumped, tmp_path):
    pipeline, text = corpus
    port = free_port()
    ray = [sys.executable, "-m", "ray.scripts.scripts"]
    common = ["--num-cpus", "1", "--object-store-memory", str(OBJECT_STORE), "--disable-usage-stats"]
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    try:
        subprocess.run(ray + ["start", "--head", "--port", str(port), "--node-ip-address", "127.0.0.1",
                              "--include-dashboard=false", *common], check=True, capture_output=True, env=env)
        subprocess.run(ray + ["start", "--address", f"127.0.0.1:{port}", "--node-ip-address", "127.0.0.1", *common],
                       check=True, capture_output=True, env=env)
        report = embed_corpus(text, tmp_path / "out", pipeline, address=f"127.0.0.1:{port}", actors=2, shard_rows=8)
        assert report.written == 4
        import ray as ray_api

        ray_api.init(address=f"127.0.0.1:{port}")
        try:
            assert len([node for node in ray_api.nodes() if node["Alive"]]) == 2
        finally:
            ray_api.shutdown()
    finally:
        subprocess.run(ray + ["stop", "--force"], capture_output=True, env=env)
    assert_matches_dump(tmp_path / "out", dumped, text)


@pytest.mark.slow
def test_a_killed_worker_fails_the_run_and_the_rerun_skips_the_shards_written(corpus, dumped, tmp_path, monkeypatch):
    pipeline, text = corpus
    out = tmp_path / "out"
    marker = tmp_path / "kill-after"
    marker.write_text("2")  # the actor dies right after writing its second shard
    monkeypatch.setenv(KILL_MARKER_ENV, str(marker))
    with pytest.raises(RuntimeError, match="run the same command again"):
        embed_corpus(text, out, pipeline, shard_rows=4, max_restarts=0, object_store_memory=OBJECT_STORE, progress=None)
    assert not marker.exists()
    records = sorted(out.glob("shard-*.json"))
    assert 2 <= len(records) < 8
    # a damaged shard is not verified, so it is done again
    record = json.loads(records[0].read_text())
    damaged = out / records[0].name.replace(".json", ".parquet")
    damaged.write_bytes(damaged.read_bytes()[:-10])
    assert not shard_done(out, record["shard"], record["input_sha256"])

    marker.write_text("1")  # and with restarts, a worker killed in the rerun costs a retry, not the run
    report = embed_corpus(text, out, pipeline, shard_rows=4, object_store_memory=OBJECT_STORE, progress=None)
    assert not marker.exists()
    assert report.skipped == len(records) - 1
    assert report.written == 8 - report.skipped
    assert_matches_dump(out, dumped, text)


def test_without_ray_the_error_says_what_to_install(corpus, tmp_path, monkeypatch):
    pipeline, text = corpus
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(ImportError, match=r"pip install spacy-elmo\[ray\]"):
        embed_corpus(text, tmp_path / "out", pipeline)
