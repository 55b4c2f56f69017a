import signal
import subprocess
import time

import pytest
import torch
from safetensors.torch import load_file

from spacy_elmo.training.checkpoints import LM_NAME, list_checkpoints
from spacy_elmo.training.pretrain import pretrain

from .conftest import PYTHON, ROOT, TINY_CFG, cli_env, tiny_config


def _weights(model_dir):
    tensors = load_file(str(model_dir / "model.safetensors"))
    tensors.update({f"softmax.{k}": v for k, v in load_file(str(model_dir / "softmax.safetensors")).items()})
    return tensors


def _assert_same(a, b):
    assert a.keys() == b.keys()
    for name in a:
        assert torch.allclose(a[name], b[name], rtol=0, atol=1e-6), name


def _command(train, out, *extra):
    # sampled softmax and dropout: the RNG state has to be restored too
    return [
        PYTHON, "-m", "spacy_elmo", "pretrain", str(TINY_CFG), "--output", str(out), "--paths.train", str(train),
        "--training.max_steps", "30", "--training.checkpoint_frequency", "5", "--training.dropout", "0.2",
        "--softmax.n_samples", "8", "--training.max_batch_tokens", "128", *extra,
    ]


@pytest.mark.slow
def test_sigkilled_run_resumes_to_the_same_weights(lm_corpus, tmp_path):
    train, _ = lm_corpus
    env = cli_env()
    reference = subprocess.run(_command(train, tmp_path / "ref"), env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert reference.returncode == 0, reference.stderr[-2000:]

    killed_dir = tmp_path / "killed"
    process = subprocess.Popen(_command(train, killed_dir), env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and process.poll() is None:
        done = list_checkpoints(killed_dir / "checkpoints")
        if done and int(done[-1].name.split("-")[1]) >= 10:
            break
        time.sleep(0.01)
    process.send_signal(signal.SIGKILL)
    assert process.wait(timeout=30) == -signal.SIGKILL, "the run ended before it could be killed"
    steps = [int(p.name.split("-")[1]) for p in list_checkpoints(killed_dir / "checkpoints")]
    assert 10 <= max(steps) < 30

    resumed = subprocess.run(_command(train, killed_dir, "--resume"), env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert f"training from step {max(steps)}" in resumed.stderr
    _assert_same(_weights(tmp_path / "ref" / "model-last"), _weights(killed_dir / "model-last"))


@pytest.mark.parametrize("mode", ["sentences", "windows"])
def test_resume_skips_a_damaged_checkpoint_and_continues_exactly(lm_corpus, tmp_path, mode):
    train, _ = lm_corpus
    settings = dict(
        training__mode=mode, training__checkpoint_frequency=5, training__dropout=0.2, softmax__n_samples=8,
        training__batch_size=8, training__max_batch_tokens=128, training__log_frequency=5,
    )
    pretrain(tiny_config(train, training__max_steps=24, **settings), tmp_path / "ref")
    pretrain(tiny_config(train, training__max_steps=12, **settings), tmp_path / "run")
    # checkpoints at 5, 10 and 12 (the end); the newest is damaged: resume from step 10
    newest = list_checkpoints(tmp_path / "run" / "checkpoints")[-1]
    assert newest.name == "step-00000012"
    data = bytearray((newest / LM_NAME).read_bytes())
    data[len(data) // 2] ^= 0x01
    (newest / LM_NAME).write_bytes(bytes(data))
    with pytest.warns(RuntimeWarning, match="skipping damaged checkpoint"):
        summary = pretrain(tiny_config(train, training__max_steps=24, **settings), tmp_path / "run", resume=True)
    assert summary.steps == 24
    _assert_same(_weights(tmp_path / "ref" / "model-last"), _weights(tmp_path / "run" / "model-last"))
