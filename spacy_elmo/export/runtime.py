"""Run an exported biLM: ONNX Runtime (CPU provider) or TorchScript, from the file and its record.

``ExportedBiLM(path)`` reads the record beside the file (``exporter.record_path``), makes the
char ids by the convention it names (the published byte ids, or the learned vocabulary written
beside the file) and gives what ``BiLM.embed`` gives: per sentence, every layer at its tokens.

A TorchScript file is a program, and loading one unpickles its constants: the package never loads
one itself (it loads no model that way). Where you trust the file, load it
(``torch.jit.load(path)``, or libtorch) and hand the module over: ``ExportedBiLM(path,
module=torch.jit.load(path))``. An ONNX file is data, which ONNX Runtime runs as it is.
"""
import json
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch

from ..bilm import CharVocabulary, batch_char_ids, plan_batches
from .exporter import ExportError, chars_path, record_path


class ExportedBiLM:
    """An exported biLM file, ready to run.

    path (Path): the .onnx or TorchScript file; its record must lie beside it.
    threads (int): ONNX Runtime's intra-op threads (TorchScript uses torch's setting).
    module (Optional[torch.jit.ScriptModule]): for a TorchScript file, the module you loaded from it
        where you trust it (see the module docstring).
    """

    def __init__(self, path: Path, *, threads: int = 1, module: Optional[Any] = None) -> None:
        self.path = Path(path)
        if not self.path.is_file():
            raise ExportError(f"{self.path}: exported file not found")
        if not record_path(self.path).is_file():
            raise ExportError(f"{record_path(self.path)}: the record beside the exported file is missing")
        self.record: Dict[str, Any] = json.loads(record_path(self.path).read_text(encoding="utf-8"))
        self.format = self.record["format"]
        convention = self.record["char_ids"]
        self.token_width = int(convention["token_width"])
        self.char_vocab: Optional[CharVocabulary] = None
        if convention["name"] == "learned":
            data = json.loads(chars_path(self.path).read_text(encoding="utf-8"))
            self.char_vocab = CharVocabulary.from_json(data)
        if self.format == "onnx":
            import onnxruntime

            options = onnxruntime.SessionOptions()
            options.intra_op_num_threads = threads
            options.inter_op_num_threads = 1
            self._session = onnxruntime.InferenceSession(str(self.path), options, providers=["CPUExecutionProvider"])
        elif module is None:
            raise ExportError(f"{self.path}: a TorchScript file is a program, which this package does not load; where "
                              "you trust it, give it as ExportedBiLM(path, module=torch.jit.load(path))")
        else:
            self._module = module.eval()

    def batch_ids(self, sentences: Sequence[Sequence[str]]) -> Tuple[np.ndarray, np.ndarray]:
        """The char ids and lengths of a batch, sentence boundaries added (``BiLM.batch_ids``)."""
        if self.char_vocab is not None:
            return self.char_vocab.batch_ids(sentences, self.token_width - 1)
        return batch_char_ids(sentences, self.token_width)

    def layers(self, char_ids: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        """The file's output: (n_layers + 1, batch, length, width), as ``BiLM.forward``'s layers."""
        char_ids = np.ascontiguousarray(char_ids, dtype=np.int64)
        lengths = np.ascontiguousarray(lengths, dtype=np.int64)
        if self.format == "onnx":
            return self._session.run(None, {"char_ids": char_ids, "lengths": lengths})[0]
        with torch.no_grad():
            return self._module(torch.from_numpy(char_ids), torch.from_numpy(lengths)).numpy()

    def embed(self, sentences: Sequence[Sequence[str]], *, batch_size: int = 64) -> List[np.ndarray]:
        """Per sentence, in input order, float32 (L+1, n_tokens, width): ``BiLM.embed``'s result."""
        results: List[Optional[np.ndarray]] = [None] * len(sentences)
        for batch in plan_batches([len(s) for s in sentences], batch_size=batch_size):
            ids, lengths = self.batch_ids([sentences[i] for i in batch])
            layers = self.layers(ids, lengths)
            for row, index in enumerate(batch):
                results[index] = np.ascontiguousarray(layers[:, row, 1 : int(lengths[row]) - 1])
        return [r for r in results if r is not None]
