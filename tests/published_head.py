"""A tiny published model with its head, written as AllenNLP publishes ``original``'s: the
options + weights pair of ``tests/data/allennlp/tiny`` beside a ``*_softmax_weights.hdf5``
(``softmax/W``, ``softmax/b``) and its vocabulary, which lists ``</S>`` before ``<S>`` so that
row order is tested."""
import shutil
from pathlib import Path
from typing import Sequence

import h5py
import numpy as np

from .conftest import TINY

SPECIALS = ("</S>", "<S>", "<UNK>")
WORDS = ("the", "cat", "dog", "sees", "a", "bird", ".", "big", "small", "likes", "fish", "red")


def write_published_head(
    folder: Path, *, words: Sequence[str] = WORDS, seed: int = 0, std: float = 0.5, width: int = 16,
    softmax_name: str = "tiny_softmax_weights.hdf5",
) -> Path:
    """A folder holding options.json, weights.hdf5, the softmax and vocab.txt.

    RETURNS (Path): the folder.
    """
    folder.mkdir(parents=True, exist_ok=True)
    for name in ("options.json", "weights.hdf5"):
        shutil.copy(TINY / name, folder / name)
    vocabulary = [*SPECIALS, *words]
    (folder / "vocab.txt").write_text("\n".join(vocabulary) + "\n", encoding="utf-8")
    rng = np.random.default_rng(seed)
    with h5py.File(folder / softmax_name, "w") as handle:
        handle.create_dataset("softmax/W", data=rng.normal(0, std, (len(vocabulary), width)).astype(np.float32))
        handle.create_dataset("softmax/b", data=rng.normal(0, 0.5, len(vocabulary)).astype(np.float32))
    return folder
