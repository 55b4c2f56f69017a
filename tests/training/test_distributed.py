import json
import subprocess

import pytest
import torch
from safetensors.torch import load_file

from spacy_elmo.training.checkpoints import list_checkpoints

from .conftest import PYTHON, ROOT, cli_env

WORKER = "tests.training.ddp_worker"


@pytest.mark.slow
def test_two_process_torchrun_ends_with_identical_weights(lm_corpus, tmp_path):
    train, dev = lm_corpus
    out = tmp_path / "out"
    command = [PYTHON, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", "-m", WORKER, str(train), str(dev), str(out)]
    result = subprocess.run(command, env=cli_env(), cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    assert "rank 0: 12 steps" in result.stdout and "rank 1: 12 steps" in result.stdout
    # shutdown joins gloo's threads: one still running at interpreter exit can abort a finished run
    assert "rank 0: 0 backend threads after shutdown" in result.stdout, result.stdout
    assert "rank 1: 0 backend threads after shutdown" in result.stdout, result.stdout
    rank0, rank1 = load_file(str(out / "rank0.safetensors")), load_file(str(out / "rank1.safetensors"))
    assert rank0.keys() == rank1.keys()
    # bitwise: DDP gives both ranks the same all-reduced gradients for the same weights
    for name in rank0:
        assert torch.equal(rank0[name], rank1[name]), name
    # the saved model is the one both ranks hold
    saved = load_file(str(out / "model-last" / "model.safetensors"))
    assert torch.equal(saved["forward_lstm.layers.0.projection.weight"], rank0["bilm.forward_lstm.layers.0.projection.weight"])
    # rank 0 alone writes: one record per report, one checkpoint per step count
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records if r["kind"] == "train"] == [3, 6, 9, 12]
    assert [r["step"] for r in records if r["kind"] == "eval"] == [6, 12]
    assert [p.name for p in list_checkpoints(out / "checkpoints")] == ["step-00000005", "step-00000010", "step-00000012"]
    # each rank reads its own byte range of the training file, not the whole file
    size = train.stat().st_size
    longest = max(len(line) for line in train.read_bytes().split(b"\n")) + 1
    ranges = [json.loads((out / f"reads-rank{rank}.json").read_text()) for rank in range(2)]
    assert all(len(r) == 1 and r[0][0] == str(train) for r in ranges), ranges
    (_, start0, end0), (_, start1, end1) = ranges[0][0], ranges[1][0]
    assert start0 == 0 and end1 == size and start0 < start1 < end0 < end1
    assert end0 - start1 <= longest  # shared: only the line across the cut
    assert all(end - start < size / 2 + longest for _, start, end in (ranges[0][0], ranges[1][0]))
    checkpoint = json.loads((out / "checkpoints" / "step-00000012" / "state.json").read_text())
    assert checkpoint["step"] == 12
    # each rank's RNG (dropout masks, softmax samples) is its own and saved for an exact resume
    rng = load_file(str(out / "checkpoints" / "step-00000012" / "training.safetensors"))
    assert not torch.equal(rng["rng.torch.r0"], rng["rng.torch.r1"])


@pytest.mark.slow
def test_a_distributed_finetune_trains_every_process_in_the_precision_the_main_process_chose(lm_corpus, tmp_path):
    import io

    from spacy_elmo.training.pretrain import pretrain

    from .conftest import tiny_config

    train, dev = lm_corpus
    pretrain(tiny_config(train, training__max_steps=2), tmp_path / "pre", stream=io.StringIO())
    command = [PYTHON, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", "-m",
               "tests.training.ddp_finetune_worker", str(train), str(dev), str(tmp_path / "pre" / "model-last"), str(tmp_path / "ft")]
    result = subprocess.run(command, env=cli_env(), cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    # rank 1 alone would have taken bf16 by the device's rule; it takes the main process's timed choice
    assert "rank 0: trains in autocast off" in result.stdout and "rank 1: trains in autocast off" in result.stdout, result.stdout
