"""Pretraining as two torchrun nodes on this host: two launchers, one worker each, meet in a c10d
rendezvous on 127.0.0.1 and write to one output folder, as nodes of a cluster share a filesystem.
One node's worker SIGKILLs itself at a planned point of its own progress (elastic_worker.py);
torchrun restarts the group (``--max-restarts``), the restarted workers resume from the newest
complete checkpoint with no flag given, and the run must end with the weights of a two-node run
never interrupted."""
import io
import os
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Dict, List, Optional

import pytest

from spacy_elmo.training.checkpoints import list_checkpoints
from spacy_elmo.training.pretrain import pretrain

from ..reliability.tiny_training import assert_same_weights, final_weights
from .conftest import PYTHON, ROOT, TINY_CFG, cli_env, tiny_config, write_corpus

WORKER = ROOT / "tests" / "training" / "elastic_worker.py"
STEPS, EVERY = 20, 5
# how long a two-node run may take before the test calls it hung (a guard, not a measure; one
# takes about 25 s on two cores)
HANG_S = 240


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    data = tmp_path_factory.mktemp("data")
    return write_corpus(data / "train.txt", 400, seed=1), write_corpus(data / "dev.txt", 60, seed=2)


@pytest.fixture(scope="module")
def reference(corpus, tmp_path_factory) -> Path:
    """The uninterrupted two-node run, launched as the interrupted ones are."""
    output = tmp_path_factory.mktemp("reference") / "run"
    _two_nodes(*corpus, output)
    return output


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _launcher(train: Path, dev: Path, output: Path, *, port: int) -> List[str]:
    """One node's torchrun; its worker runs ``python -m spacy_elmo pretrain`` (through elastic_worker.py)."""
    return [
        PYTHON, "-m", "torch.distributed.run", "--nnodes", "2", "--nproc-per-node", "1",
        "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", f"test-{port}",
        "--local-addr", "127.0.0.1", "--max-restarts", "2", "--monitor-interval", "0.2",
        str(WORKER), "pretrain", str(TINY_CFG), "--output", str(output), "--paths.train", str(train),
        "--paths.dev", str(dev), "--training.max_steps", str(STEPS), "--training.checkpoint_frequency", str(EVERY),
        "--training.eval_frequency", "10", "--training.dropout", "0.1", "--softmax.n_samples", "8",
    ]


def _two_nodes(train: Path, dev: Path, output: Path, kill: Optional[Dict[str, str]] = None) -> str:
    """Start both nodes and wait for both. RETURNS their logs (stdout and stderr), node by node."""
    # torch 2.13 shares the rendezvous store with the workers and keeps it across restarts: the
    # restarted workers can read the killed ones' gloo addresses and fail or hang
    # (pytorch/pytorch#135712); with this each round's rank 0 worker hosts a fresh store
    env = {**cli_env(), "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1", **(kill or {})}
    command = _launcher(train, dev, output, port=_free_port())
    logs = [output.parent / f"{output.name}-node{i}.log" for i in range(2)]
    nodes = []
    for log in logs:
        with open(log, "w") as handle:
            # a session each, so that a hung node's workers go with it
            nodes.append(subprocess.Popen(command, env=env, cwd=ROOT, stdout=handle, stderr=subprocess.STDOUT, start_new_session=True))
    deadline = time.monotonic() + HANG_S
    try:
        for node in nodes:
            node.wait(timeout=max(deadline - time.monotonic(), 1))
    except subprocess.TimeoutExpired:
        pass
    finally:
        hung = [node for node in nodes if node.poll() is None]
        for node in hung:
            os.killpg(node.pid, signal.SIGKILL)
            node.wait()
    text = "\n".join(f"--- node {i}\n{log.read_text()}" for i, log in enumerate(logs))
    assert not hung, f"hung after {HANG_S}s:\n{text[-6000:]}"
    assert [node.returncode for node in nodes] == [0, 0], text[-6000:]
    return text


@pytest.mark.slow
@pytest.mark.parametrize(
    "rank,point",
    [
        ("1", "step:13"),  # mid-run, on the node that does not write
        ("0", "checkpoint:15:2"),  # the writer, inside the checkpoint of step 15, before its rename
    ],
)
def test_two_node_elastic_run_survives_a_killed_worker_with_the_uninterrupted_weights(corpus, reference, tmp_path, rank, point):
    """The weights match bit for bit: the restarted group restores each rank's weights, optimizer,
    RNG and data position from the checkpoint and repeats the same single-threaded arithmetic,
    and gloo's all-reduce of two ranks' gradients adds the same two numbers whichever node holds
    which rank after the new rendezvous."""
    output, marker = tmp_path / "run", tmp_path / "killed.txt"
    logs = _two_nodes(*corpus, output, {"ELASTIC_KILL_RANK": rank, "ELASTIC_KILL": point, "ELASTIC_KILL_MARKER": str(marker)})
    assert marker.read_text().startswith(f"rank {rank} "), marker.read_text()
    # the killed worker's agent saw it die; the restarted group went on from the checkpoint of step 10
    assert "failed (exitcode: -9)" in logs, logs[-6000:]
    assert "training from step 0 " in logs and "training from step 10 " in logs, logs[-6000:]
    assert [p.name for p in list_checkpoints(output / "checkpoints")] == [f"step-{s:08d}" for s in (10, 15, 20)]
    # the half-written checkpoint of the kill inside a write was never read, and is gone
    assert not [name for name in os.listdir(output / "checkpoints") if ".tmp-" in name]
    assert_same_weights(final_weights(output), final_weights(reference))


def test_a_run_that_torchrun_restarted_resumes_without_the_flag(lm_corpus, tmp_path, monkeypatch):
    train, _ = lm_corpus
    output = tmp_path / "run"
    pretrain(tiny_config(train, training__max_steps=4, training__checkpoint_frequency=2), output, stream=io.StringIO())
    config = tiny_config(train, training__max_steps=6, training__checkpoint_frequency=2)
    # started again by hand, over the checkpoints of a run, without --resume: refused as before
    with pytest.raises(FileExistsError):
        pretrain(config, output, stream=io.StringIO())
    monkeypatch.setenv("TORCHELASTIC_RESTART_COUNT", "1")
    log = io.StringIO()
    assert pretrain(config, output, stream=log).steps == 6
    assert "training from step 4 " in log.getvalue()
