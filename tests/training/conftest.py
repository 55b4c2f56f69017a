import random
import sys
from pathlib import Path

import pytest

from spacy_elmo.training.config import load_lm_config

ROOT = Path(__file__).resolve().parents[2]
TINY_CFG = ROOT / "configs" / "bilm-tiny.cfg"

NOUNS = ["cat", "dog", "bird", "fish", "horse", "mouse"]
ADJECTIVES = ["big", "small", "red", "old"]
VERBS = ["sees", "likes", "chases", "finds"]


RING = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven"]


def grammar_sentences(n: int, seed: int = 0):
    """Sentences a language model learns in a few dozen steps: counting runs along a ring of
    number words (next and previous word are certain) and a small random grammar."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        if rng.random() < 0.7:
            start = rng.randrange(len(RING))
            out.append([RING[(start + k) % len(RING)] for k in range(rng.randint(5, 10))])
            continue
        words = ["the", rng.choice(ADJECTIVES), rng.choice(NOUNS), rng.choice(VERBS), "the", rng.choice(NOUNS)]
        out.append(words + ["."])
    return out


def write_corpus(path: Path, n: int, seed: int = 0) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(" ".join(s) + "\n" for s in grammar_sentences(n, seed)), encoding="utf-8")
    return path


@pytest.fixture()
def lm_corpus(tmp_path):
    """(train file, dev file) of the tiny grammar."""
    return write_corpus(tmp_path / "data" / "train.txt", 400, seed=1), write_corpus(tmp_path / "data" / "dev.txt", 60, seed=2)


def tiny_config(train, dev=None, **overrides):
    """bilm-tiny.cfg with overrides given as section__key=value."""
    values = {"paths.train": str(train), "paths.dev": str(dev) if dev else None}
    values.update({k.replace("__", "."): v for k, v in overrides.items()})
    return load_lm_config(TINY_CFG, values)


def cli_env():
    """Environment for subprocesses: the repo importable, one thread."""
    import os

    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env["OMP_NUM_THREADS"] = "1"
    return env


PYTHON = sys.executable
