"""embed-corpus on Spark: on local[2] and on a standalone master with workers on 127.0.0.1, one of
them killed mid-run, the same shard files, byte for byte, as on Ray, and the resume."""
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("pyspark", reason="PySpark is not installed (pip install spacy-elmo[spark]); the Spark path is not tested")
pytest.importorskip("ray.data", reason="Ray Data is not installed (pip install spacy-elmo[ray]); nothing to compare Spark's shards with")

if not (shutil.which("java") or os.environ.get("JAVA_HOME")):
    pytest.skip("no Java runtime (java on PATH or JAVA_HOME): Spark cannot start", allow_module_level=True)

import psutil  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from spacy_elmo.cli import app  # noqa: E402
from spacy_elmo.embed.corpus import embed_corpus  # noqa: E402
from spacy_elmo.embed.runs import FINISHED_NAME, SETTINGS_NAME  # noqa: E402
from spacy_elmo.embed.shards import RECORDS, shard_key  # noqa: E402
from spacy_elmo.embed.spark import embed_corpus_spark  # noqa: E402
from spacy_elmo.io import load_allennlp  # noqa: E402
from spacy_elmo.pipeline import create_pipeline  # noqa: E402
from tests.embed.test_corpus import free_port  # noqa: E402

SHARD_ROWS, BATCH = 4, 3
FAST_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
FILES = ("a.txt", "b/c.txt", "b/d.txt", "e.txt")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, tiny_paths, tiny_sentences):
    """A pipeline of the tiny biLM, a folder of four text files (one with a line that is not
    UTF-8), and the shards a local Ray writes of it."""
    root = tmp_path_factory.mktemp("embed-spark")
    pipeline = root / "pipeline"
    create_pipeline(load_allennlp(*tiny_paths), lang="en").to_disk(pipeline)
    folder = root / "in"
    (folder / "b").mkdir(parents=True)
    lines = [" ".join(s) for s in tiny_sentences]
    for k, name in enumerate(FILES):
        text = "\n".join(f"{line} {k} {i}" for i in range(2) for line in (lines if k % 2 else reversed(lines))) + "\n"
        (folder / name).write_bytes(text.encode("utf-8") + (b"bad \xff\n" if k == 1 else b""))
    report = embed_corpus(folder, root / "ray", pipeline, shard_rows=SHARD_ROWS, batch_size=BATCH,
                          object_store_memory=100_000_000, progress=None)
    assert report.written == report.shards and report.undecodable == 1
    return pipeline, folder, root / "ray", report


@pytest.fixture(scope="module")
def spark():
    from pyspark.sql import SparkSession

    os.environ["PYSPARK_PYTHON"] = sys.executable  # the workers run this interpreter, with spacy_elmo
    session = (SparkSession.builder.master("local[2]").appName("spacy-elmo test")
               .config("spark.ui.enabled", "false").config("spark.driver.host", "127.0.0.1").getOrCreate())
    yield session
    session.stop()


def records(folder):
    return {path.name: json.loads(path.read_text()) for path in sorted((folder / RECORDS).glob("shard-*.json"))}


def checksums(folder):
    return {name: record["sha256"] for name, record in records(folder).items()}


@pytest.mark.slow
def test_spark_writes_the_shards_ray_writes_and_resumes(spark, corpus, tmp_path):
    pipeline, folder, ray_output, on_ray = corpus
    on_spark = embed_corpus_spark(folder, tmp_path / "spark", pipeline, spark=spark, shard_rows=SHARD_ROWS, batch_size=BATCH)
    assert (on_spark.shards, on_spark.written, on_spark.rows, on_spark.undecodable) == (
        on_ray.shards, on_ray.written, on_ray.rows, on_ray.undecodable)
    # the same Parquet bytes: the SHA-256 each shard's JSON records
    assert checksums(tmp_path / "spark") == checksums(ray_output) and len(checksums(ray_output)) == on_ray.shards
    assert (tmp_path / "spark" / SETTINGS_NAME).read_text() == (ray_output / SETTINGS_NAME).read_text()
    assert (tmp_path / "spark" / FINISHED_NAME).read_text() == (ray_output / FINISHED_NAME).read_text()

    spark_records = records(tmp_path / "spark")
    (tmp_path / "spark" / "shard-00001-00000.parquet").unlink()
    # the command, on the session that is active (getOrCreate)
    args = ["embed-corpus", "--input", str(folder), "--output", str(tmp_path / "spark"), "--model", str(pipeline),
            "--shard-rows", str(SHARD_ROWS), "--batch-size", str(BATCH), "--engine", "spark"]
    again = CliRunner().invoke(app, args)
    assert again.exit_code == 0, again.output
    assert f"{on_ray.shards - 1} already done, 1 written" in again.output
    assert records(tmp_path / "spark") == spark_records


def spark_class(*args):
    import pyspark

    return [str(Path(pyspark.__file__).parent / "bin" / "spark-class"), *args]


class Standalone:
    """A Spark standalone master and its workers on 127.0.0.1, as processes of this test."""

    def __init__(self, root: Path):
        import pyspark

        self.root = root
        self.port = free_port()
        self.env = {**os.environ, "SPARK_HOME": str(Path(pyspark.__file__).parent), "SPARK_LOCAL_IP": "127.0.0.1",
                    "PYSPARK_PYTHON": sys.executable, "SPARK_LOG_DIR": str(root / "logs"),
                    # small JVMs that start fast (the client compiler only): a test's cluster, not a fast one
                    "SPARK_DAEMON_MEMORY": "256m", "SPARK_DAEMON_JAVA_OPTS": FAST_JVM}
        self.processes = []

    def start_master(self):
        self.start("org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(self.port),
                   "--webui-port", str(free_port()), name="master")
        self.wait_for(lambda: self.accepts(self.port), "the master to listen")

    @property
    def url(self):
        return f"spark://127.0.0.1:{self.port}"

    @staticmethod
    def accepts(port):
        import socket

        with socket.socket() as sock:
            return sock.connect_ex(("127.0.0.1", port)) == 0

    def start(self, *args, name):
        log = open(self.root / f"{name}.log", "wb")
        self.processes.append(subprocess.Popen(spark_class(*args), env=self.env, stdout=log, stderr=subprocess.STDOUT))
        return self.processes[-1]

    def add_worker(self, name):
        """A worker with one core (one executor of the application, one Python worker at a time)."""
        (self.root / name).mkdir()
        return self.start("org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--cores", "1",
                          "--memory", "1g", "--webui-port", str(free_port()), "--work-dir", str(self.root / name),
                          self.url, name=name)

    @staticmethod
    def wait_for(condition, what, timeout=120.0):
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                raise TimeoutError(f"waited {timeout:.0f} s for {what}")
            time.sleep(0.05)

    def stop(self):
        for process in self.processes:
            kill_tree(process.pid)


def kill_tree(pid):
    """SIGKILL a process and everything below it (a worker, its executor, the executor's Python), as a
    machine that dies takes them all; RETURNS the command lines killed."""
    try:
        root = psutil.Process(pid)
        tree = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []
    killed = []
    for process in tree:
        try:
            killed.append(" ".join(process.cmdline()))
            process.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(tree, timeout=10)
    return killed


def reading(worker, folder):
    """The input files a worker's Python processes have open: the files its tasks are embedding."""
    found = set()
    try:
        processes = psutil.Process(worker.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return found
    for process in processes:
        try:
            if "python" in process.name():
                found |= {Path(f.path) for f in process.open_files() if Path(f.path).is_relative_to(folder)}
        except psutil.Error:  # a Python worker may come and go while it is looked at
            pass
    return found


@pytest.mark.slow
def test_a_standalone_cluster_losing_a_worker_mid_run_writes_the_shards_ray_writes(corpus, tmp_path):
    pipeline, folder, ray_output, on_ray = corpus
    output = tmp_path / "out"
    cluster, driver = Standalone(tmp_path), None
    try:
        cluster.start_master()
        workers = [cluster.add_worker("worker-1"), cluster.add_worker("worker-2")]
        # the driver is the command, in its own process (one Spark context per process)
        submit = (f"--conf spark.ui.enabled=false --driver-java-options '{FAST_JVM}' --conf spark.executor.memory=512m "
                  f"--conf 'spark.executor.extraJavaOptions={FAST_JVM}' pyspark-shell")
        env = {**cluster.env, "PYSPARK_SUBMIT_ARGS": submit}
        driver = subprocess.Popen(
            [sys.executable, "-m", "spacy_elmo", "embed-corpus", "--engine", "spark", "--master", cluster.url,
             "--input", str(folder), "--output", str(output), "--model", str(pipeline),
             "--shard-rows", str(SHARD_ROWS), "--batch-size", str(BATCH)],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )
        victim = {}
        last = {index: max(shard_key(path.stem[len("shard-"):])[1] for path in (ray_output / RECORDS).glob(f"shard-{index:05d}-*.json"))
                for index in range(len(FILES))}

        def a_worker_is_mid_file():
            """A worker reading an input file whose first shard is written and last is not (its task half done)."""
            if driver.poll() is not None:
                raise AssertionError(f"the run ended before a worker was killed:\n{driver.stdout.read()[-3000:]}")
            for worker in workers:
                for path in reading(worker, folder.resolve()):
                    index = FILES.index(path.relative_to(folder.resolve()).as_posix())
                    if (output / RECORDS / f"shard-{index:05d}-00000.json").is_file() and not (
                            output / RECORDS / f"shard-{index:05d}-{last[index]:05d}.json").is_file():
                        victim.update(worker=worker, file=index)
                        return True
            return False

        cluster.wait_for(a_worker_is_mid_file, "a worker half-way through a file", timeout=300)
        written_before = len(list((output / RECORDS).glob("shard-*.json")))
        killed = kill_tree(victim["worker"].pid)  # the other worker lives on and takes over
        stdout, _ = driver.communicate(timeout=420)
    finally:
        if driver is not None and driver.poll() is None:
            kill_tree(driver.pid)
        cluster.stop()
    assert any("pyspark" in line for line in killed) and written_before < on_ray.shards
    assert driver.returncode == 0, stdout[-3000:]
    found = re.search(r"(\d+) shards under .*: (\d+) already done, (\d+) written", stdout)
    shards, skipped, written = map(int, found.groups())
    # the killed worker's file was done again from its first shard not written: those before were skipped
    assert shards == on_ray.shards and skipped >= 1 and skipped + written == shards
    assert checksums(output) == checksums(ray_output)
    assert (output / FINISHED_NAME).read_text() == (ray_output / FINISHED_NAME).read_text()


def test_a_spark_task_runs_on_the_gpu_its_scheduler_assigned_and_else_on_the_cpu():
    from pyspark.resource import ResourceInformation

    from spacy_elmo.embed.spark import task_device

    assert task_device({"gpu": ResourceInformation("gpu", ["1"])}) == "cuda:1"
    assert task_device({"gpu": ResourceInformation("gpu", [])}) == "cpu"
    assert task_device({}) == "cpu"


@pytest.mark.slow
def test_the_local_example_runs_as_written_without_pyspark_python(corpus, tmp_path):
    """The docs' local command, with PYSPARK_PYTHON unset and a `python3` first on PATH that lacks the
    package (Spark's own default for its workers): the workers run the command's Python."""
    pipeline, folder, ray_output, _ = corpus
    env = {key: value for key, value in os.environ.items() if key not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")}
    env["PATH"] = os.pathsep.join(["/usr/bin", env.get("PATH", "")])
    command = [sys.executable, "-m", "spacy_elmo", "embed-corpus", "--engine", "spark", "--master", "local[1]",
               "--input", str(folder), "--output", str(tmp_path / "out"), "--model", str(pipeline),
               "--shard-rows", str(SHARD_ROWS), "--batch-size", str(BATCH)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert checksums(tmp_path / "out") == checksums(ray_output)
