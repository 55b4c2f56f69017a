"""ONNX Runtime's sigmoid and tanh, and the exported files on long sentences of a deep model:
results/export/CPU/activations.json (``CPU``: this CPU's folder, ``records.machine.cpu_folder``;
``amd-f25-m17/`` holds the committed one).

- ``kernels``: the largest |float32 - float64| of each form of sigmoid and tanh over 4,000,001 evenly
  spaced points of [-20, 20]: ONNX Runtime's own float32 ``Sigmoid`` and ``Tanh`` nodes (CPU
  provider) at every graph optimization level, the forms an ONNX export writes
  (``graph.OnnxRuntimeActivations``) run on ONNX Runtime, and torch's ops.
- ``long``: ``long_memory_bilm()``, a 3-layer model whose rounding differences are felt many steps
  later yet stay within the 1e-5 contract in float32, on 200 tokens (``long_sentences()``: batched
  with a 37- and a 130-token row, and alone): the largest |layer - float64 reference| of each layer
  for the ONNX file as exported, the same graph with ONNX Runtime's own Sigmoid and Tanh
  (``ExportGraph(for_onnx=False)`` written as ONNX), the TorchScript file and the float32 reference.
- ``speed``: the cost of the exported forms, the shipped en_small's ONNX file with each form of
  the activations on ONNX Runtime (1 thread), 16 sentences of 25 words in one batch, median seconds
  of interleaved repeats after a warm-up.

    python -m lab.reliability.export_precision --output results/export/CPU/activations.json
"""
import argparse
import copy
import json
import os
import statistics
import tempfile
import time
import warnings
from pathlib import Path
from typing import Dict, List

import numpy as np
import torch

from spacy_elmo.bilm import BiLM, BiLMConfig
from spacy_elmo.export import export_bilm
from spacy_elmo.export.exporter import CHECK_SENTENCES, OPSET, write_onnx
from spacy_elmo.export.graph import ExportGraph, OnnxRuntimeActivations
from spacy_elmo.export.runtime import ExportedBiLM
from spacy_elmo.io import load_bilm
from spacy_elmo.records.machine import record_path
from spacy_elmo.records.provenance import mark_start, model_record, portable_path, provenance

# three layers, clips other than the test fixtures' (3 / 3), LSTM weights three times torch's default scale
LONG_MEMORY = BiLMConfig(
    char_embedding_dim=4, filters=((1, 4), (2, 8), (3, 16)), n_highway=1, dim=64, projection_dim=16, n_layers=3,
    cell_clip=5.0, proj_clip=2.0,
)
LONG_WORDS = ["the", "bank", "of", "river", "money", "flooded", "a", "sat", "on", "we", ".", "Über", "x" * 30, "cat"]
LEVELS = ("ORT_DISABLE_ALL", "ORT_ENABLE_BASIC", "ORT_ENABLE_EXTENDED", "ORT_ENABLE_ALL")
SPEED_WORDS = "the bank of the river flooded and we sat on its side watching money float by".split()


def long_memory_bilm(seed: int = 0) -> BiLM:
    """``LONG_MEMORY`` with torch's default initialization (seeded) and every LSTM weight times 3:
    a rounding difference is carried many steps, and the float32 reference stays within the 1e-5
    contract of the float64 one on ``long_sentences()`` (``long`` in the record says how far)."""
    torch.manual_seed(seed)
    bilm = BiLM(LONG_MEMORY)
    with torch.no_grad():
        for name, param in bilm.named_parameters():
            if "lstm" in name:
                param.mul_(3.0)
    return bilm.eval()


def long_sentences(seed: int = 0) -> List[List[str]]:
    """A 200-word sentence of ``LONG_WORDS`` (seeded), then its first 37 words and its words 50..179."""
    rng = np.random.default_rng(seed)
    words = [str(rng.choice(LONG_WORDS)) for _ in range(200)]
    return [words, words[:37], words[50:180]]


def _session(path: Path, level: str = "ORT_ENABLE_ALL"):
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.graph_optimization_level = getattr(onnxruntime.GraphOptimizationLevel, level)
    return onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def _write_graph(bilm: BiLM, path: Path, *, for_onnx: bool) -> Path:
    """``ExportGraph(bilm, for_onnx=...)`` as an ONNX file, written as ``export_bilm`` writes one."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.jit's deprecation notice
        scripted = torch.jit.script(ExportGraph(bilm, for_onnx=for_onnx).eval())
    ids, lengths = bilm.batch_ids(CHECK_SENTENCES)
    write_onnx(scripted, (torch.from_numpy(ids), torch.from_numpy(lengths)), path, OPSET)
    return path


class _SigmoidAndTanh(torch.nn.Module):
    """The exported forms of sigmoid and tanh, side by side, as a graph of their own."""

    def __init__(self) -> None:
        super().__init__()
        self.activations = OnnxRuntimeActivations()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.stack([self.activations.sigmoid(x), self.activations.tanh(x)])


def kernels(work: Path, points: int = 4_000_001) -> Dict[str, Dict[str, float]]:
    """The largest |float32 - float64| of each form over ``points`` evenly spaced points of [-20, 20]."""
    import onnx
    from onnx import TensorProto, helper

    x = torch.linspace(-20, 20, points)
    exact = {"sigmoid": torch.sigmoid(x.double()), "tanh": torch.tanh(x.double())}
    path = work / "exported-forms.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the TorchScript-based exporter's deprecation notice
        torch.onnx.export(torch.jit.script(_SigmoidAndTanh()), (x,), str(path), dynamo=False, opset_version=OPSET,
                          input_names=["x"], dynamic_axes={"x": {0: "n"}})
    exported = dict(zip(("sigmoid", "tanh"), torch.from_numpy(_session(path).run(None, {"x": x.numpy()})[0]).double()))
    table: Dict[str, Dict[str, float]] = {}
    for name, op in (("sigmoid", "Sigmoid"), ("tanh", "Tanh")):
        errors = {"torch": float((getattr(torch, name)(x).double() - exact[name]).abs().max())}
        node = helper.make_graph(
            [helper.make_node(op, ["x"], ["y"])], op, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None])],
        )
        path = work / f"{op}.onnx"
        onnx.save(helper.make_model(node, opset_imports=[helper.make_opsetid("", OPSET)]), str(path))
        for level in LEVELS:
            got = torch.from_numpy(_session(path, level).run(None, {"x": x.numpy()})[0]).double()
            errors[f"onnxruntime {op}, {level}"] = float((got - exact[name]).abs().max())
        errors["onnxruntime, the exported form"] = float((exported[name] - exact[name]).abs().max())
        table[name] = errors
    return table


def _per_layer(got: np.ndarray, expected: np.ndarray) -> List[float]:
    return [float(np.abs(got[k].astype(np.float64) - expected[k]).max()) for k in range(expected.shape[0])]


def long_run(work: Path) -> Dict[str, Dict[str, List[float]]]:
    """Each runtime's largest difference from the float64 reference, per layer, batched and alone."""
    bilm = long_memory_bilm()
    export_bilm(bilm, work / "long.onnx", "onnx", model={"name": "long memory"})
    export_bilm(bilm, work / "long.pt", "torchscript", model={"name": "long memory"})
    own_kernels = _session(_write_graph(bilm, work / "long-own-kernels.onnx", for_onnx=False))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        scripted = ExportedBiLM(work / "long.pt", module=torch.jit.load(str(work / "long.pt")))
    onnx_file = ExportedBiLM(work / "long.onnx")
    exact = copy.deepcopy(bilm).double()
    sentences = long_sentences()
    table: Dict[str, Dict[str, List[float]]] = {}
    for label, batch in (("batched", sentences), ("alone", sentences[:1])):
        ids, lengths = bilm.batch_ids(batch)
        ids_t, lengths_t = torch.from_numpy(ids), torch.from_numpy(lengths)
        with torch.no_grad():
            expected = exact(ids_t, lengths_t).layers.numpy()
            reference = bilm(ids_t, lengths_t).layers.numpy()
        table[label] = {
            "onnx file (exported forms)": _per_layer(onnx_file.layers(ids, lengths), expected),
            "onnx, ONNX Runtime's own Sigmoid and Tanh": _per_layer(
                own_kernels.run(None, {"char_ids": ids, "lengths": lengths})[0], expected),
            "torchscript file": _per_layer(scripted.layers(ids, lengths), expected),
            "float32 reference": _per_layer(reference, expected),
        }
    return table


def speed(work: Path, repeats: int) -> Dict[str, object]:
    """Median seconds of the en_small ONNX graph with each form of the activations."""
    bilm = load_bilm(None, optimize=False)
    sessions = {
        "exported forms": _session(_write_graph(bilm, work / "speed-exported.onnx", for_onnx=True)),
        "ONNX Runtime's own Sigmoid and Tanh": _session(_write_graph(bilm, work / "speed-own.onnx", for_onnx=False)),
    }
    rng = np.random.default_rng(0)
    sentences = [[str(rng.choice(SPEED_WORDS)) for _ in range(25)] for _ in range(16)]
    ids, lengths = bilm.batch_ids(sentences)
    feed = {"char_ids": ids, "lengths": lengths}
    times: Dict[str, List[float]] = {name: [] for name in sessions}
    for session in sessions.values():
        session.run(None, feed)
    names = list(sessions)
    for r in range(repeats):
        for name in names[r % 2 :] + names[: r % 2]:
            start = time.perf_counter()
            sessions[name].run(None, feed)
            times[name].append(time.perf_counter() - start)
    medians = {name: statistics.median(t) for name, t in times.items()}
    return {
        "model": model_record(None),
        "batch": {"sentences": len(sentences), "words_each": 25},
        "repeats": repeats,
        "seconds": {name: {"median": medians[name], "min": min(t), "max": max(t)} for name, t in times.items()},
        "exported_over_own": medians["exported forms"] / medians["ONNX Runtime's own Sigmoid and Tanh"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=lambda text: Path(record_path(text)), default="results/export/CPU/activations.json")
    parser.add_argument("--repeats", type=int, default=20, help="timed runs of each form (speed)")
    args = parser.parse_args()
    mark_start(f"python -m lab.reliability.export_precision --output {portable_path(args.output)} "
               f"--repeats {args.repeats}")
    torch.set_num_threads(1)
    import onnxruntime

    record: Dict[str, object] = {"onnxruntime": onnxruntime.__version__, "torch": torch.__version__}
    record["load_average"] = {"before": os.getloadavg()}
    with tempfile.TemporaryDirectory() as folder:
        record["kernels"] = kernels(Path(folder))
        print(json.dumps(record["kernels"], indent=1), flush=True)
        record["long"] = long_run(Path(folder))
        print(json.dumps(record["long"], indent=1), flush=True)
        record["speed"] = speed(Path(folder), args.repeats)
        print(json.dumps(record["speed"]["seconds"], indent=1), record["speed"]["exported_over_own"], flush=True)
    record["load_average"]["after"] = os.getloadavg()
    record["provenance"] = provenance(
        model=record["speed"]["model"],
        model_note="kernels: no model; long: long_memory_bilm() (random, seed 0); speed: the shipped en_small",
        data={}, data_note="sentences drawn by seeded generators from the script's own word lists",
    )
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
