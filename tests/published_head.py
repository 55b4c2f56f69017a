"""A tiny published model with its head, written as AllenNLP publishes ``original``'s: the
options + weights pair of ``tests/data/allennlp/tiny`` beside a ``*_softmax_weights.hdf5``
(``softmax/W``, ``softmax/b``) and its vocabulary, which lists ``</S>`` before ``<S>`` so that
row order is tested; and the references bilm-tf's own graph computed (``tests/data/bilm_tf``)."""
import json
import shutil
from pathlib import Path
from typing import Any, Dict, Sequence, Tuple

import h5py
import numpy as np

from .conftest import DATA, TINY

# a tiny biLM trained by bilm-tf, its softmax as AllenNLP publishes one, and bilm-tf's references
BILM_TF = DATA / "bilm_tf"

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


def bilm_tf_reference() -> Tuple[Path, Dict[str, Any], Dict[str, np.ndarray]]:
    """RETURNS (Tuple[Path, dict, dict]): the bilm-tf fixture folder (pair, softmax, vocabulary),
    its reference.json and the arrays of its reference.npz."""
    reference = json.loads((BILM_TF / "reference.json").read_text(encoding="utf-8"))
    with np.load(BILM_TF / "reference.npz", allow_pickle=False) as arrays:
        return BILM_TF, reference, dict(arrays)
