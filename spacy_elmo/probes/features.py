"""Frozen biLM vectors for the probes: one forward pass per distinct sentence, kept for the run.

Tasks and training fractions share sentences (a 10% sample is inside the 50% one), so vectors
are kept in memory by sentence for the whole run. With a directory, they are also kept on disk,
one file per (model weights, input file) pair, named by both hashes: a later run on the same
model and file reads them back instead of running the biLM.
"""
import hashlib
import io
import sys
import time
from pathlib import Path
from typing import IO, Dict, List, Optional, Protocol, Sequence, Set, Tuple

import numpy as np

from ..files import file_sha256, write_atomic
from ..bilm import BiLM
from ..io.native import bilm_to_bytes
from ..io.progress import EmbedProgress

Sentence = Tuple[str, ...]


class Embedder(Protocol):
    """What a probe needs of a model: ``embed`` as ``BiLM.embed`` (per sentence, (L+1, n_tokens, width))."""

    def embed(self, sentences: Sequence[Sequence[str]], *, batch_size: int = 64) -> List[np.ndarray]:
        ...


def weights_hash(model: Embedder) -> str:
    """RETURNS (str): the SHA-256 of a biLM's weights as safetensors (as a saved model's config.json
    records it), or a model's own ``identity`` attribute for other feature extractors."""
    if isinstance(model, BiLM):
        return hashlib.sha256(bilm_to_bytes(model)).hexdigest()
    return str(getattr(model, "identity", type(model).__name__))


def _key(sentence: Sequence[str]) -> str:
    return hashlib.sha1("\x00".join(sentence).encode("utf-8")).hexdigest()


class VectorCache:
    """All layers of every sentence asked for, computed once.

    model (Embedder): the biLM (or any object with its ``embed``).
    model_hash (str): identifies the weights (``weights_hash``); names the disk files.
    directory (Optional[Path]): keep vectors on disk here too; None: memory only.
    batch_size (int): sentences per forward pass.
    stream (Optional[IO[str]]): where progress goes (stderr by default); None is stderr.
    quiet (bool): no progress lines.
    """

    def __init__(
        self,
        model: Embedder,
        *,
        model_hash: str,
        directory: Optional[Path] = None,
        batch_size: int = 64,
        stream: Optional[IO[str]] = None,
        quiet: bool = False,
    ) -> None:
        self.model = model
        self.model_hash = model_hash
        self.directory = Path(directory) if directory is not None else None
        self.batch_size = batch_size
        self.stream = stream if stream is not None else sys.stderr
        self.quiet = quiet
        self.tokens_embedded = 0
        self.seconds = 0.0
        self._memory: Dict[str, np.ndarray] = {}
        self._by_file: Dict[str, Set[str]] = {}

    def layers(self, sentences: Sequence[Sentence], *, source: Optional[Path] = None, label: str = "") -> List[np.ndarray]:
        """Every layer of each sentence.

        sentences (Sequence[Sentence]): token tuples.
        source (Optional[Path]): the file they were read from (for the disk cache).
        label (str): names the data in progress lines.
        RETURNS (List[np.ndarray]): per sentence, float32 (L+1, n_tokens, width).
        """
        keys = [_key(s) for s in sentences]
        disk_name = self._disk_name(source)
        if disk_name is not None and disk_name not in self._by_file:
            self._by_file[disk_name] = self._load(disk_name)
        todo: Dict[str, Sentence] = {}
        for key, sentence in zip(keys, sentences):
            if key not in self._memory:
                todo.setdefault(key, tuple(sentence))
        if todo:
            self._compute(todo, label)
        if disk_name is not None and not set(keys) <= self._by_file[disk_name]:
            self._by_file[disk_name].update(keys)
            self._save(disk_name)
        return [self._memory[k] for k in keys]

    def _compute(self, todo: Dict[str, Sentence], label: str) -> None:
        items = sorted(todo.items(), key=lambda item: len(item[1]))
        total = sum(len(s) for _, s in items)
        progress = EmbedProgress(total, label, self.stream, quiet=self.quiet)
        chunk = max(self.batch_size * 8, 1)
        start = time.monotonic()
        for begin in range(0, len(items), chunk):
            part = items[begin : begin + chunk]
            vectors = self.model.embed([list(s) for _, s in part], batch_size=self.batch_size)
            for (key, _), array in zip(part, vectors):
                self._memory[key] = array
            progress.advance(sum(len(s) for _, s in part))
        progress.close()
        self.tokens_embedded += total
        self.seconds += time.monotonic() - start

    def _disk_name(self, source: Optional[Path]) -> Optional[str]:
        if self.directory is None or source is None:
            return None
        return f"{self.model_hash[:16]}-{file_sha256(Path(source))[:16]}.npz"

    def _load(self, name: str) -> Set[str]:
        path = self.directory / name
        if not path.is_file():
            return set()
        with np.load(path, allow_pickle=False) as stored:
            keys, lengths, vectors = [str(k) for k in stored["keys"]], stored["lengths"], stored["vectors"]
        offsets = np.concatenate([[0], np.cumsum(lengths)])
        for i, key in enumerate(keys):
            self._memory.setdefault(key, np.ascontiguousarray(vectors[:, offsets[i] : offsets[i + 1]]))
        return set(keys)

    def _save(self, name: str) -> None:
        keys = sorted(self._by_file[name])
        arrays = [self._memory[k] for k in keys]
        self.directory.mkdir(parents=True, exist_ok=True)
        buffer = io.BytesIO()
        np.savez(
            buffer,
            keys=np.array(keys),
            lengths=np.array([a.shape[1] for a in arrays], dtype=np.int64),
            vectors=np.concatenate(arrays, axis=1),
        )
        write_atomic(self.directory / name, buffer.getvalue())
