"""embed-corpus on Ray: a local Ray, a two-node cluster on 127.0.0.1 with the driver's memory capped, a killed worker, a stopped driver and the resume."""
import json
import os
import re
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
from spacy_elmo.io.text_input import read_sentences  # noqa: E402
from spacy_elmo.embed.corpus import KILL_MARKER_ENV, cluster_sizing, embed_corpus  # noqa: E402
from spacy_elmo.embed.runs import SETTINGS_NAME  # noqa: E402
from spacy_elmo.embed.shards import RECORDS, read_shards, shard_done, whitespace_tokens  # noqa: E402
from spacy_elmo.io import load_allennlp, load_bilm  # noqa: E402
from spacy_elmo.pipeline import create_pipeline  # noqa: E402

OBJECT_STORE = 100_000_000
# float32 sums over other batches change the last bits: the fast path's contract (load_bilm) is about 2e-6,
# absolute plus relative (a value near 1 may move by twice that)
DUMP_TOLERANCE = 2e-6


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, tiny_paths, tiny_sentences):
    """A pipeline directory of the tiny biLM, and a text corpus of distinct lines (one empty)."""
    root = tmp_path_factory.mktemp("embed-corpus")
    pipeline = root / "pipeline"
    create_pipeline(load_allennlp(*tiny_paths), lang="en").to_disk(pipeline)
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


def assert_matches_dump(output, dumped, corpus_text, name="corpus.txt"):
    rows = list(read_shards(output))
    sentences = read_sentences(corpus_text)
    assert [row_id for row_id, _, _ in rows] == [f"{name}:{i}" for i in range(1, len(dumped) + 1)]  # lines from 1
    assert [tokens for _, tokens, _ in rows] == sentences
    for (_, _, layers), expected in zip(rows, dumped):
        assert layers.dtype == np.float32 and layers.shape == expected.shape
        np.testing.assert_allclose(layers, expected, rtol=DUMP_TOLERANCE, atol=DUMP_TOLERANCE)


def test_tokens_and_offsets_are_dumps_split():
    assert whitespace_tokens("  the   bank ") == (["the", "bank"], [2, 8], [5, 12])
    assert whitespace_tokens("") == ([], [], [])


@pytest.mark.slow
def test_a_local_ray_started_by_the_function_matches_dump(corpus, dumped, tmp_path, monkeypatch):
    import pyarrow.parquet as pq

    pipeline, text = corpus
    report = embed_corpus(text, tmp_path / "out", pipeline, actors=2, shard_rows=8, object_store_memory=OBJECT_STORE)
    assert (report.shards, report.skipped, report.written, report.rows, report.undecodable) == (4, 0, 4, len(dumped), 0)
    # the run recorded itself finished: a rerun verifies the shards and returns without Ray
    with monkeypatch.context() as patched:
        patched.setitem(sys.modules, "ray", None)
        again = embed_corpus(text, tmp_path / "out", pipeline, actors=2, shard_rows=8)
    assert (again.shards, again.skipped, again.written, again.actors) == (4, 4, 0, 0)
    assert_matches_dump(tmp_path / "out", dumped, text)
    metadata = pq.read_schema(tmp_path / "out" / "shard-00000-00000.parquet").metadata
    recorded = json.loads((pipeline / "elmo" / "model" / "config.json").read_text())["weights_sha256"]
    assert metadata[b"spacy_elmo.weights_sha256"].decode() == recorded
    assert metadata[b"spacy_elmo.model"] == b"pipeline"
    row = pq.read_table(tmp_path / "out" / "shard-00000-00002.parquet").slice(4, 1).to_pylist()[0]
    line = text.read_text(encoding="utf-8").splitlines()[20]
    assert [line[s:e] for s, e in zip(row["token_start"], row["token_end"])] == row["tokens"] == line.split()


@pytest.mark.slow
def test_float16_mix_through_the_command(corpus, dumped, tmp_path):
    pipeline, text = corpus
    args = ["embed-corpus", "--input", str(text), "--output", str(tmp_path / "out"), "--model", str(pipeline),
            "--layers", "mix", "--dtype", "float16", "--shard-rows", "16", "--batch-size", "5"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "2 written" in result.output and "batches of 5" in result.output
    rows = list(read_shards(tmp_path / "out"))
    for (_, _, mixed), expected in zip(rows, dumped):
        assert mixed.dtype == np.float32 and mixed.shape == expected.shape[1:]
        np.testing.assert_allclose(mixed.astype(np.float32), expected.mean(axis=0), rtol=1e-3, atol=1e-3)
    other = CliRunner().invoke(app, args[:-6] + ["--dtype", "float32", "--shard-rows", "16"])
    assert other.exit_code == 1 and "other settings (dtype)" in other.output
    # without --model the shipped biLM, by its name: another model than this folder's
    default = CliRunner().invoke(app, args[:5] + args[7:])
    assert default.exit_code == 1 and "(model, weights_sha256)" in default.output
    recorded = json.loads((tmp_path / "out" / SETTINGS_NAME).read_text())
    assert recorded["files"] == 1 and recorded["model"] == "pipeline"


def test_the_pool_follows_the_cluster_unless_given():
    # as many actors as the CPUs allow at the threads each has, none kept back for the driver
    assert cluster_sizing({"CPU": 16.0}, actors=None, cpus_per_actor=2, batch_size=None) == (8, 0, 64)
    assert cluster_sizing({"CPU": 2.0}, actors=None, cpus_per_actor=1, batch_size=None) == (2, 0, 32)
    assert cluster_sizing({"CPU": 3.0}, actors=None, cpus_per_actor=2, batch_size=None) == (1, 0, 64)
    assert cluster_sizing({"CPU": 1.0}, actors=None, cpus_per_actor=1, batch_size=None) == (1, 0, 32)
    assert cluster_sizing({"CPU": 64.0, "GPU": 4.0}, actors=None, cpus_per_actor=4, batch_size=None) == (4, 1, 256)
    assert cluster_sizing({"CPU": 16.0}, actors=3, cpus_per_actor=1, batch_size=8) == (3, 0, 8)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# token authentication (Ray's default for `ray start` since 2.5x) needs a token on every node; a
# cluster on one machine for a test does without
RAY_ENV = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "disabled"}


def stop_cluster(port: int) -> None:
    """Stop this cluster's processes only (each names its GCS port), not every Ray on the machine."""
    import psutil

    mine = []
    for process in psutil.process_iter(["cmdline"]):
        cmdline = " ".join(process.info["cmdline"] or [])
        # the GCS address a process names is the machine's address with this port
        if "ray" in cmdline and (re.search(rf":{port}\b", cmdline) or f"--gcs_server_port={port}" in cmdline):
            mine.append(process)
    for process in mine:
        process.terminate()
    _, alive = psutil.wait_procs(mine, timeout=3)
    for process in alive:
        process.kill()


@pytest.fixture(scope="module")
def cluster():
    """A two-node Ray cluster on 127.0.0.1 (a head and a worker, one CPU each): its address."""
    port = free_port()
    ray = [sys.executable, "-m", "ray.scripts.scripts"]
    common = ["--num-cpus", "1", "--object-store-memory", str(OBJECT_STORE), "--disable-usage-stats"]
    env = {**os.environ, **RAY_ENV}
    try:
        subprocess.run(ray + ["start", "--head", "--port", str(port), "--node-ip-address", "127.0.0.1",
                              "--include-dashboard=false", *common], check=True, capture_output=True, env=env)
        subprocess.run(ray + ["start", "--address", f"127.0.0.1:{port}", "--node-ip-address", "127.0.0.1", *common],
                       check=True, capture_output=True, env=env)
        yield f"127.0.0.1:{port}"
    finally:
        stop_cluster(port)


# The driver, in its own process: one small run first (Ray Data's threads and modules loaded), then
# its data segment capped (RLIMIT_DATA) a little above what it holds, then the large corpus.
CAPPED_DRIVER = """
import json, resource, sys, threading
from spacy_elmo.embed.corpus import embed_corpus
threading.stack_size(1 << 20)  # a new thread's stack (8 MiB by default) would count against the cap
address, warm, large, out, pipeline, headroom = sys.argv[1:7]
def vm(key):
    return next(int(l.split()[1]) * 1024 for l in open("/proc/self/status") if l.startswith(key))
import ray
ray.init(address=address, log_to_driver=False)
embed_corpus(warm, out + "-warm", pipeline, shard_rows=8, progress=None)
cap = vm("VmData") + int(headroom)
resource.setrlimit(resource.RLIMIT_DATA, (cap, cap))
report = embed_corpus(large, out, pipeline, shard_rows=40, progress=None)
try:
    bytearray(int(headroom) * 20)  # what reading the corpus into the driver would need
    refused = False
except MemoryError:
    refused = True
nodes = len([n for n in ray.nodes() if n["Alive"]])
print(json.dumps({"rows": report.rows, "written": report.written, "refused": refused, "nodes": nodes}))
"""
DRIVER_HEADROOM = 8 << 20


def small_thread_stacks() -> None:
    """Threads' stacks of 1 MiB (glibc sizes them by RLIMIT_STACK, 8 MiB by default), so that a
    thread Ray starts in the driver does not count 8 MiB against its capped data segment."""
    import resource

    resource.setrlimit(resource.RLIMIT_STACK, (1 << 20, resource.getrlimit(resource.RLIMIT_STACK)[1]))
PADDING = 100_000


@pytest.mark.slow
def test_a_driver_capped_far_below_the_corpus_embeds_a_folder_of_gz_on_two_nodes(cluster, corpus, dumped, tmp_path):
    import gzip

    pipeline, text = corpus
    lines = text.read_text(encoding="utf-8").splitlines()
    folder = tmp_path / "corpus"
    (folder / "b").mkdir(parents=True)
    # tokens as the corpus has them, the bytes between them whitespace: the driver's share grows with
    # the bytes, the embedding only with the tokens
    per_file = 20 * DRIVER_HEADROOM // (2 * PADDING) + 1
    size = 0
    for name in ("a.txt.gz", "b/c.txt.gz"):
        with gzip.open(folder / name, "wt", encoding="utf-8", compresslevel=1) as handle:
            for i in range(per_file):
                tokens = lines[i % len(lines)].split()
                line = " ".join(tokens[:2]) + " " * PADDING + " ".join(tokens[2:]) + "\n"
                size += len(line.encode("utf-8"))
                handle.write(line)
    assert size >= 20 * DRIVER_HEADROOM
    env = {**os.environ, **RAY_ENV, "MALLOC_ARENA_MAX": "2"}
    result = subprocess.run(
        [sys.executable, "-c", CAPPED_DRIVER, cluster, str(text), str(folder), str(tmp_path / "out"), str(pipeline),
         str(DRIVER_HEADROOM)], capture_output=True, text=True, env=env, timeout=600, preexec_fn=small_thread_stacks,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    found = json.loads(result.stdout.strip().splitlines()[-1])
    assert found == {"rows": 2 * per_file, "written": 2 * -(-per_file // 40), "refused": True, "nodes": 2}
    rows = list(read_shards(tmp_path / "out"))
    assert [row_id for row_id, _, _ in rows] == [f"{name}:{i}" for name in ("a.txt.gz", "b/c.txt.gz") for i in range(1, per_file + 1)]  # lines from 1
    for k, (_, tokens, layers) in enumerate(rows):
        expected = dumped[(k % per_file) % len(lines)]
        assert tokens == lines[(k % per_file) % len(lines)].split()
        np.testing.assert_allclose(layers, expected, rtol=DUMP_TOLERANCE, atol=DUMP_TOLERANCE)


class StopAfter:
    """A progress callback that stops the driver after ``n`` shards, as a killed driver would."""

    def __init__(self, n):
        self.n = n

    def __call__(self, shards, *_):
        if shards >= self.n:
            raise RuntimeError("driver stopped")


@pytest.mark.slow
def test_a_killed_worker_is_retried_a_stopped_run_resumes_and_bad_bytes_are_counted(corpus, dumped, tmp_path, monkeypatch):
    pipeline, text = corpus
    folder = tmp_path / "in"
    folder.mkdir()
    shutil.copy(text, folder / "corpus.txt")
    (folder / "zz-bad.txt").write_bytes(b"fine line\nbad \xff line\n")
    out = tmp_path / "out"
    marker = tmp_path / "kill-after"
    marker.write_text("1")  # the actor dies right after writing its first shard: Ray restarts it
    monkeypatch.setenv(KILL_MARKER_ENV, str(marker))
    with pytest.raises(RuntimeError, match="run the same command again"):
        embed_corpus(folder, out, pipeline, shard_rows=4, object_store_memory=OBJECT_STORE, progress=StopAfter(3))
    assert not marker.exists()
    records = sorted((out / RECORDS).glob("shard-*.json"))
    total = -(-len(dumped) // 4) + 1
    # the actors may finish the shards in flight after the driver stopped
    assert 3 <= len(records) <= total
    # a damaged shard is not verified, so it is done again
    record = json.loads(records[0].read_text())
    damaged = out / records[0].name.replace(".json", ".parquet")
    damaged.write_bytes(damaged.read_bytes()[:-10])
    assert not shard_done(out, record["shard"], record["input_sha256"])

    report = embed_corpus(folder, out, pipeline, shard_rows=4, object_store_memory=OBJECT_STORE, progress=None)
    assert report.skipped == len(records) - 1
    assert report.written == total - report.skipped
    rows = list(read_shards(out))
    assert rows[-1][:2] == ("zz-bad.txt:2", ["bad", "\ufffd", "line"])
    assert sum(json.loads(p.read_text())["undecodable"] for p in (out / RECORDS).glob("shard-*.json")) == 1
    for (_, _, layers), expected in zip(rows, dumped):
        np.testing.assert_allclose(layers, expected, rtol=DUMP_TOLERANCE, atol=DUMP_TOLERANCE)

    with pytest.raises(RuntimeError, match=r"zz-bad.txt:2: byte 4 is not UTF-8.*fix or remove that input"):
        embed_corpus(folder, tmp_path / "strict", pipeline, shard_rows=4, strict_utf8=True,
                     object_store_memory=OBJECT_STORE, progress=None)


@pytest.mark.slow
def test_a_truncated_gz_among_good_files_is_named_in_one_line_and_the_run_goes_on_once_it_is_removed(corpus, dumped, tmp_path):
    import gzip

    pipeline, text = corpus
    folder = tmp_path / "in"
    folder.mkdir()
    shutil.copy(text, folder / "corpus.txt")
    whole = gzip.compress("".join(f"line {i} of a file cut short\n" for i in range(5000)).encode("utf-8"))
    (folder / "m-cut.txt.gz").write_bytes(whole[: len(whole) // 2])
    (folder / "z.txt").write_text("the last file\n", encoding="utf-8")
    args = ["embed-corpus", "--input", str(folder), "--output", str(tmp_path / "out"), "--model", str(pipeline),
            "--shard-rows", "8", "--actors", "1"]
    failed = CliRunner().invoke(app, args)
    assert failed.exit_code == 1 and "Traceback" not in failed.output
    [said] = [line for line in failed.output.splitlines() if "m-cut.txt.gz" in line]
    assert said.startswith("embed-corpus stopped: m-cut.txt.gz: cannot be read to its end, damaged ")
    assert "Truncated compressed stream" in said and "fix or remove that input" in said
    assert "run the same command again to do the rest" not in failed.output
    (folder / "m-cut.txt.gz").unlink()
    done = CliRunner().invoke(app, args)
    assert done.exit_code == 0, done.output
    rows = list(read_shards(tmp_path / "out"))
    assert rows[-1][:2] == ("z.txt:1", ["the", "last", "file"])
    assert_matches_dump_rows(rows[:-1], dumped)


def assert_matches_dump_rows(rows, dumped):
    assert len(rows) == len(dumped)
    for (_, _, layers), expected in zip(rows, dumped):
        np.testing.assert_allclose(layers, expected, rtol=DUMP_TOLERANCE, atol=DUMP_TOLERANCE)


def test_without_ray_the_error_says_what_to_install(corpus, tmp_path, monkeypatch):
    pipeline, text = corpus
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(ImportError, match=r"pip install spacy-elmo\[ray\]"):
        embed_corpus(text, tmp_path / "out", pipeline)
