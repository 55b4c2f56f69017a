import json
import os
import tempfile
from pathlib import Path

import numpy as np
import pytest
import torch

from spacy_elmo.bilm import BiLM, BiLMConfig
from spacy_elmo.io import load_allennlp

DATA = Path(__file__).parent / "data"
TINY = DATA / "allennlp" / "tiny"
TRAINED = DATA / "allennlp" / "trained"

torch.set_num_threads(1)
# The compiled LSTM step is built once into a temporary folder, shared by the processes tests start
# (its file name hashes the sources, torch, the compiler and the CPU).
os.environ.setdefault("SPACY_ELMO_KERNELS", str(Path(tempfile.gettempdir()) / "spacy-elmo-test-kernels"))
# Records the tests write (and hold to check_record) come from whatever tree the tests run in: say so,
# so that a checkout with local edits passes as a clean one does (tests/records/test_provenance.py unsets it).
os.environ.setdefault("SPACY_ELMO_DIRTY_NOTE", "written by the test suite from the tree it ran in; not a results record")


@pytest.fixture(autouse=True)
def one_torch_thread():
    """Every test starts with one torch thread and leaves it so: benchmark mains set their own
    count, and tests that compare with a fresh (one-thread) process bitwise depend on it."""
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(1)


@pytest.fixture()
def broken_compiler(monkeypatch, tmp_path):
    """$CXX is a compiler that fails with "fatal: no headers", and built kernels go under tmp_path."""
    compiler = tmp_path / "broken-c++"
    compiler.write_text("#!/bin/sh\necho 'fatal: no headers' >&2\nexit 1\n", encoding="utf-8")
    compiler.chmod(0o755)
    monkeypatch.setenv("CXX", str(compiler))
    monkeypatch.setenv("SPACY_ELMO_KERNELS", str(tmp_path / "kernels"))
    return "fatal: no headers"


@pytest.fixture(scope="session")
def tiny_paths():
    return TINY / "options.json", TINY / "weights.hdf5"


@pytest.fixture(scope="session")
def tiny_sentences():
    return json.loads((TINY / "sentences.json").read_text(encoding="utf-8"))["tokens"]


@pytest.fixture(scope="session")
def tiny_names():
    return json.loads((TINY / "sentences.json").read_text(encoding="utf-8"))["names"]


@pytest.fixture(scope="session")
def tiny_expected():
    with np.load(TINY / "expected.npz") as data:
        return {k: data[k] for k in data.files}


def load_tiny_bilm() -> BiLM:
    """The tiny fixture model (AllenNLP format, random weights)."""
    return load_allennlp(TINY / "options.json", TINY / "weights.hdf5")


@pytest.fixture()
def tiny_bilm(tiny_paths):
    return load_allennlp(*tiny_paths)


@pytest.fixture(scope="session")
def trained_paths():
    return TRAINED / "options.json", TRAINED / "lm_weights.hdf5"


def random_bilm(seed: int = 0, **changes) -> BiLM:
    """A small randomly initialized biLM (recurrent weights scaled down for stable numerics)."""
    base = dict(
        char_embedding_dim=4, filters=((1, 4), (2, 4), (3, 8)), n_highway=1, dim=24, projection_dim=8, n_layers=2
    )
    base.update(changes)
    torch.manual_seed(seed)
    bilm = BiLM(BiLMConfig(**base))
    with torch.no_grad():
        for name, param in bilm.named_parameters():
            if "state_linearity" in name:
                param.mul_(0.5)
    return bilm.eval()


@pytest.fixture()
def small_bilm():
    return random_bilm()


@pytest.fixture()
def process_threads():
    """torch set to 3 threads for the test (a count no default gives), then as it was."""
    before = torch.get_num_threads()
    torch.set_num_threads(3)
    yield 3
    torch.set_num_threads(before)
