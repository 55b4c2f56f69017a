"""Write a biLM as an ONNX or TorchScript file, with a JSON record beside it.

The graph is ``graph.ExportGraph`` (the reference computation, no runner), compiled with
``torch.jit.script``: its timestep loop stays a loop, so the file runs any batch size and length
(``torch.jit.trace`` would unroll the loop to the example's length). ONNX goes through torch's
TorchScript-based exporter (``dynamo=False``) at the opset ``OPSET``; the loop becomes an ONNX
``Loop``, and its sigmoids and tanhs take forms that ONNX Runtime computes precisely
(``graph.OnnxRuntimeActivations``). The record (``record_path``) names the model and its weights'
SHA-256, the char-id convention, the inputs and outputs, the component's default mix of the layers
(``mix``: the weights, gamma and layer means ``doc._.elmo.mixed`` is made with), the opset, the
activations' forms and the versions; a model with a learned character vocabulary (ELMoForManyLangs) also gets it beside the
file (``chars_path``), as ``CharVocabulary.to_json`` writes it, so the file's ids can be made
without the source model.
"""
import hashlib
import json
import logging
import os
import tempfile
import warnings
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

import numpy as np
import torch

from ..bilm import BiLM
from ..files import file_sha256, write_atomic
from .graph import ExportGraph

FORMATS = ("onnx", "torchscript")
OPSET = 17
# fp32: the export as is; int8: ONNX Runtime's dynamic quantization of the ONNX file's products,
# kept only where its layers meet the cosine bound on CHECK_SENTENCES; fp16: refused (see REFUSED).
PRECISIONS = ("fp32", "int8", "fp16")
COSINE_BOUNDS = {"int8": 0.999, "fp16": 0.9999}
REFUSED = {
    "fp16": "fp16 is not offered: no float16 form of this graph has been measured on ONNX Runtime's CPU "
    "provider against the project's 0.9999 cosine bound (export fp32, or int8 ONNX, which is checked)",
}
# The sentences a reduced precision is checked on, and the example the graph is compiled with.
CHECK_SENTENCES = [
    ["The", "quick", "brown", "fox", "jumped", "over", "the", "lazy", "dog", "."],
    ["ELMo", "vectors", "depend", "on", "the", "whole", "sentence", "."],
    ["A", "bank", "of", "the", "river", "is", "not", "a", "bank", "that", "lends", "money", "."],
    ["Short", "one"],
]
BYTE_IDS = (
    "published byte ids (spacy_elmo.bilm.chars.batch_char_ids): per token max_characters_per_token ids, "
    "begin-of-word 259, the token's UTF-8 bytes + 1 (cut to max_characters_per_token - 2 bytes), "
    "end-of-word 260, then 261; <S> is [259, 257, 260, 261...] and </S> [259, 258, 260, 261...]; "
    "a padding token is all 0"
)
LEARNED_IDS = (
    "learned character vocabulary (spacy_elmo.bilm.char_vocab.CharVocabulary.batch_ids, the model's "
    "BiLM.batch_ids): per token [word id, begin-of-word, one id per code point (cut to "
    "max_characters_per_token - 2), end-of-word, padding...]; the vocabulary is the .chars.json beside "
    "the file; a padding token is all 0"
)


ONNX_ACTIVATIONS = (
    "sigmoid as 1 / (1 + exp(-x)), tanh computed in float64 and rounded to float32 "
    "(spacy_elmo.export.graph.OnnxRuntimeActivations): ONNX Runtime's float32 Sigmoid and Tanh approximate"
)


class ExportError(ValueError):
    """An export that cannot be made as asked; the message is one line naming what to change."""


def record_path(output: Path) -> Path:
    """The JSON record beside an exported file."""
    return output.with_name(output.name + ".json")


def chars_path(output: Path) -> Path:
    """The learned character vocabulary beside an exported file (ELMoForManyLangs models only)."""
    return output.with_name(output.name + ".chars.json")


def tensors_sha256(bilm: BiLM) -> str:
    """SHA-256 over the biLM's tensors, by name in sorted order (name, dtype, shape, bytes)."""
    digest = hashlib.sha256()
    for name, tensor in sorted(bilm.state_dict().items()):
        array = tensor.detach().cpu().contiguous().numpy()
        digest.update(f"{name}|{array.dtype.str}|{list(array.shape)}|".encode())
        digest.update(array.tobytes())
    return digest.hexdigest()


def check_request(fmt: str, output: Path, precision: str = "fp32", opset: int = OPSET) -> None:
    """Refuse, in one line, what cannot be exported: before the model is loaded."""
    if fmt not in FORMATS:
        raise ExportError(f"unknown format {fmt!r}: choose one of {', '.join(FORMATS)}")
    if precision not in PRECISIONS:
        raise ExportError(f"unknown precision {precision!r}: choose one of {', '.join(PRECISIONS)}")
    if precision in REFUSED:
        raise ExportError(REFUSED[precision])
    if precision != "fp32" and fmt != "onnx":
        raise ExportError(f"{precision} is offered for ONNX only (ONNX Runtime's quantization); export {fmt} as fp32")
    if not 13 <= opset <= 20:
        raise ExportError(f"opset {opset} is outside 13..20, the opsets torch's TorchScript-based exporter writes")
    if output.is_dir():
        raise ExportError(f"{output} is a folder: give the file to write")
    if not output.parent.is_dir():
        raise ExportError(f"{output.parent}: output folder not found (create it first)")


def char_id_convention(bilm: BiLM) -> Dict[str, Any]:
    """How the exported file's ``char_ids`` are made, for the record."""
    width = bilm.token_width
    if bilm.char_vocab is None:
        return {"name": "bytes", "token_width": width, "how": BYTE_IDS}
    return {"name": "learned", "token_width": width, "how": LEARNED_IDS,
            "bos_token": bilm.char_vocab.bos_token, "eos_token": bilm.char_vocab.eos_token}


MIX_HOW = (
    "the elmo component's default mixed vector (doc._.elmo.mixed, token._.elmo): for each token t, "
    "gamma * sum_j weights[j] * (layers[j, t] - layer_means[j]), over the layers of BiLM.embed (each row's "
    "<S> and </S> dropped); layer_means null: nothing is taken off"
)


def mix_record(bilm: BiLM) -> Dict[str, Any]:
    """The component's default mix of this biLM's layers, for the record: the model's vector setting
    (``bilm.VectorSetting``: its layer weights and means), else equal weights; gamma 1."""
    setting = bilm.vector_setting
    n_layers = bilm.config.n_output_layers
    weights = [1.0 / n_layers] * n_layers if setting is None else list(setting.layer_weights)
    means = None if setting is None or setting.layer_means is None else setting.layer_means.tolist()
    return {"weights": weights, "gamma": 1.0, "layer_means": means, "how": MIX_HOW}


def export_bilm(
    bilm: BiLM,
    output: Path,
    fmt: str,
    *,
    model: Dict[str, Any],
    precision: str = "fp32",
    opset: int = OPSET,
) -> Dict[str, Any]:
    """Write ``bilm`` to ``output`` as ``fmt`` and its record beside it.

    bilm (BiLM): the model; its runner is detached (the reference computation is exported).
    output (Path): the file to write; its folder must exist.
    fmt (str): "onnx" or "torchscript".
    model (Dict[str, Any]): what the model is (``records.provenance.model_record``: name, version,
        weights file and its SHA-256), copied into the record.
    precision (str): "fp32", or "int8" (ONNX only, kept if it meets ``COSINE_BOUNDS``).
    opset (int): the ONNX opset.
    RETURNS (Dict[str, Any]): the record, as written to ``record_path(output)``.
    """
    output = Path(output)
    check_request(fmt, output, precision, opset)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.jit's deprecation notice: TorchScript is the format asked for
        scripted = torch.jit.script(ExportGraph(bilm, for_onnx=fmt == "onnx").eval())
    ids, lengths = bilm.batch_ids(CHECK_SENTENCES)
    example = (torch.from_numpy(ids), torch.from_numpy(lengths))
    record: Dict[str, Any] = {
        "format": fmt,
        "precision": precision,
        "file": output.name,
        "model": {**model, "tensors_sha256": tensors_sha256(bilm)},
        "config": bilm.config.to_options(),
        "char_ids": char_id_convention(bilm),
        "inputs": {
            "char_ids": "int64 (batch, length, token_width): each row's tokens left-aligned, sentence "
            "boundaries included as the ids hold them (batch_ids adds them)",
            "lengths": "int64 (batch,): tokens of each row, boundaries included",
        },
        "outputs": {"layers": "float32 (n_layers + 1, batch, length, 2 * projection_dim), zero at padding: "
                    "BiLM.forward's layers; BiLM.embed drops each row's first and last position (<S>, </S>)"},
        "dynamic_axes": ["batch", "length"],
        "mix": mix_record(bilm),
        "compiled_with": "torch.jit.script of spacy_elmo.export.graph.ExportGraph (the reference computation)",
        "torch": torch.__version__,
    }
    with tempfile.TemporaryDirectory(dir=output.parent, prefix=f".{output.name}.") as work:
        written = Path(work) / output.name
        if fmt == "torchscript":
            scripted.save(str(written))
        else:
            write_onnx(scripted, example, written, opset)
            record.update(opset=opset, onnx=_onnx_versions(), activations=ONNX_ACTIVATIONS)
            if precision == "int8":
                record["int8"] = _quantize_int8(written, bilm, Path(work))
        os.replace(written, output)
    record["file_sha256"] = file_sha256(output)
    if bilm.char_vocab is not None:
        write_atomic(chars_path(output), json.dumps(bilm.char_vocab.to_json(), ensure_ascii=False).encode("utf-8"))
        record["char_ids"]["vocabulary"] = chars_path(output).name
    write_atomic(record_path(output), (json.dumps(record, indent=2) + "\n").encode("utf-8"))
    return record


def write_onnx(scripted: torch.jit.ScriptModule, example, path: Path, opset: int) -> None:
    """A scripted ``ExportGraph`` as an ONNX file at ``path``: inputs ``char_ids`` and ``lengths``, output
    ``layers``, batch and length dynamic; ``example`` is its (char_ids, lengths) to record with."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the TorchScript-based exporter's deprecation notice
        torch.onnx.export(
            scripted,
            example,
            str(path),
            dynamo=False,
            opset_version=opset,
            input_names=["char_ids", "lengths"],
            output_names=["layers"],
            dynamic_axes={
                "char_ids": {0: "batch", 1: "length"},
                "lengths": {0: "batch"},
                "layers": {1: "batch", 2: "length"},
            },
        )


def _onnx_versions() -> Dict[str, str]:
    import onnx
    import onnxruntime

    return {"onnx": onnx.__version__, "onnxruntime": onnxruntime.__version__}


def _quantize_int8(path: Path, bilm: BiLM, work: Path) -> Dict[str, Any]:
    """Replace the ONNX file at ``path`` by its int8 dynamic quantization if its layers keep the
    cosine bound against the fp32 file on CHECK_SENTENCES; otherwise refuse, with the number."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    quantized = work / "int8.onnx"
    logging.getLogger().disabled, was = True, logging.getLogger().disabled  # its pre-processing advice
    try:
        quantize_dynamic(str(path), str(quantized), weight_type=QuantType.QInt8)
    finally:
        logging.getLogger().disabled = was
    ids, lengths = bilm.batch_ids(CHECK_SENTENCES)
    reference = run_onnx(path, ids, lengths)
    reduced = run_onnx(quantized, ids, lengths)
    cosine = mean_cosine(reference, reduced, lengths)
    bound = COSINE_BOUNDS["int8"]
    if not cosine >= bound:
        raise ExportError(
            f"int8 refused: ONNX Runtime's int8 layers reach a mean cosine of {cosine:.6f} to fp32, below the bound {bound}"
        )
    os.replace(quantized, path)
    return {"method": "onnxruntime.quantization.quantize_dynamic, QInt8 weights", "mean_cosine_to_fp32": cosine,
            "bound": bound, "checked_on": f"{len(CHECK_SENTENCES)} sentences (exporter.CHECK_SENTENCES)"}


def run_onnx(path: Path, ids: np.ndarray, lengths: np.ndarray, threads: int = 1) -> np.ndarray:
    """The layers an ONNX file gives on ONNX Runtime's CPU provider."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    return session.run(None, {"char_ids": ids, "lengths": lengths})[0]


def mean_cosine(reference: np.ndarray, other: np.ndarray, lengths: Sequence[int]) -> float:
    """The mean cosine between two outputs' vectors at every valid position of every layer."""
    values: List[np.ndarray] = []
    for row, n in enumerate(lengths):
        a, b = reference[:, row, : int(n)], other[:, row, : int(n)]
        den = np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1)
        values.append(((a * b).sum(-1) / np.maximum(den, 1e-30)).ravel())
    return float(np.concatenate(values).mean())


def export_model(
    path: Optional[Path],
    output: Path,
    fmt: str,
    *,
    options: Optional[Path] = None,
    weights: Optional[Path] = None,
    precision: str = "fp32",
    opset: int = OPSET,
) -> Dict[str, Any]:
    """Export the biLM ``load_bilm(path, options=..., weights=...)`` reads (the reference, not
    optimized), naming it as ``records.provenance.model_record`` does. RETURNS the record."""
    from ..io import load_bilm
    from ..records.provenance import model_record

    check_request(fmt, Path(output), precision, opset)
    bilm = load_bilm(path, options=options, weights=weights, optimize=False)
    return export_bilm(bilm, Path(output), fmt, model=model_record(path, options=options, weights=weights),
                       precision=precision, opset=opset)
