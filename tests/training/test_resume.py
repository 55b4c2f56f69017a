import signal
import subprocess

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


# `python -m spacy_elmo ARGS...` that SIGKILLs itself after the optimizer update of step STEP
KILLED_AT_STEP = """
import runpy, sys
from pathlib import Path
from tests.reliability.tiny_training import KillPoint, arm_kill
arm_kill(KillPoint("step", int(sys.argv[1])), Path(sys.argv[2]), 0)
sys.argv = ["spacy_elmo", *sys.argv[3:]]
runpy.run_module("spacy_elmo", run_name="__main__", alter_sys=True)
"""


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
    # the run kills itself right after the update of step 13, whatever the machine's speed
    killed = subprocess.run(
        [PYTHON, "-c", KILLED_AT_STEP, "13", str(killed_dir), *_command(train, killed_dir)[3:]],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    steps = [int(p.name.split("-")[1]) for p in list_checkpoints(killed_dir / "checkpoints")]
    assert max(steps) == 10

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
    assert summary.steps == 24 and summary.start_step == 10  # its tokens and seconds are steps 11-24's
    _assert_same(_weights(tmp_path / "ref" / "model-last"), _weights(tmp_path / "run" / "model-last"))


def test_a_resumed_run_logs_each_step_once(lm_corpus, tmp_path):
    import json

    train, dev = lm_corpus
    settings = dict(training__checkpoint_frequency=5, training__log_frequency=1, training__eval_frequency=4)
    pretrain(tiny_config(train, dev, training__max_steps=12, **settings), tmp_path / "run")
    # killed after step 12's records, its newest checkpoint lost: the resumed run trains 11 and 12 again
    import shutil

    shutil.rmtree(list_checkpoints(tmp_path / "run" / "checkpoints")[-1])
    with (tmp_path / "run" / "metrics.jsonl").open("a") as handle:
        handle.write('{"kind": "train", "step": 13, "lo')  # a record cut short by the kill
    pretrain(tiny_config(train, dev, training__max_steps=16, **settings), tmp_path / "run", resume=True)
    records = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    for kind in ("train", "eval"):
        steps = [r["step"] for r in records if r["kind"] == kind]
        assert steps == sorted(set(steps)), kind
    assert [r["step"] for r in records if r["kind"] == "train"] == list(range(1, 17))


def test_a_bf16_autocast_run_resumed_on_the_same_machine_is_bitwise_the_run_never_stopped(lm_corpus, tmp_path):
    train, _ = lm_corpus
    settings = dict(training__checkpoint_frequency=5, training__dropout=0.2, softmax__n_samples=8, training__batch_size=8,
                    training__max_batch_tokens=128, training__autocast="bf16")
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a CPU without bf16 arithmetic emulates it
        pretrain(tiny_config(train, training__max_steps=14, **settings), tmp_path / "ref")
        pretrain(tiny_config(train, training__max_steps=7, **settings), tmp_path / "run")
        pretrain(tiny_config(train, training__max_steps=14, **settings), tmp_path / "run", resume=True)
    reference, resumed = _weights(tmp_path / "ref" / "model-last"), _weights(tmp_path / "run" / "model-last")
    assert reference.keys() == resumed.keys()
    assert all(torch.equal(reference[name], resumed[name]) for name in reference)
