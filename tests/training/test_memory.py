"""keep_freed_memory: a training process reuses the pages it frees instead of faulting in new ones."""
import os
import subprocess
import sys

import pytest

CHILD = """
import resource, sys
import torch
from spacy_elmo.training.memory import keep_freed_memory
kept = keep_freed_memory()
def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
def allocate():
    x = torch.ones(16 * 1024 * 1024)  # 64 MB: above glibc's largest mmap threshold
    del x
for _ in range(3):  # warm-up: the first allocations fault in either case
    allocate()
before = faults()
for _ in range(5):
    allocate()
print(kept, faults() - before)
"""


def _run(env_value):
    env = {**os.environ, "SPACY_ELMO_MALLOC": env_value, "OMP_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, env=env, check=True).stdout.split()
    return out[0] == "True", int(out[1])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's allocator")
def test_freed_blocks_are_reused_without_page_faults():
    kept, faults_kept = _run("1")
    if not kept:
        pytest.skip("this C library has no mallopt")
    off, faults_default = _run("0")
    assert not off  # the environment switch leaves the allocator alone
    # five fresh 64 MB blocks fault in about 16,000 pages each; reused ones hardly any
    assert faults_default > 5 * 10_000 and faults_kept < faults_default / 4


def test_kept_kernels_are_named_for_onednn_unless_the_environment_names_a_number(monkeypatch):
    import types
    from pathlib import Path

    from spacy_elmo.cli._training_options import load_config
    from spacy_elmo.training.memory import KEPT_KERNELS, PRIMITIVE_CACHE, keep_made_kernels

    monkeypatch.delenv(PRIMITIVE_CACHE, raising=False)
    assert keep_made_kernels() == str(KEPT_KERNELS) == os.environ[PRIMITIVE_CACHE]
    monkeypatch.setenv(PRIMITIVE_CACHE, "100")
    assert keep_made_kernels() == "100" == os.environ[PRIMITIVE_CACHE]
    # pretrain and finetune name it as they read their config, before anything makes a kernel
    monkeypatch.delenv(PRIMITIVE_CACHE)
    ctx = types.SimpleNamespace(args=[])
    load_config(ctx, Path(__file__).resolve().parents[2] / "configs" / "bilm-small.cfg")
    assert os.environ[PRIMITIVE_CACHE] == str(KEPT_KERNELS)
