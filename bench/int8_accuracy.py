"""How close dynamic int8 comes to fp32 on the shipped biLM, and which layers and settings decide it.

    python -m bench.int8_accuracy --json results/bench/CPU/int8-accuracy.json
    FBGEMM_ENABLE_INSTRUCTIONS=AVX2 ONEDNN_MAX_CPU_ISA=AVX2 python -m bench.int8_accuracy ...

The second form makes fbgemm and oneDNN run their AVX2 kernels (no VNNI) on a CPU that has more:
their int16 pair sums then saturate on 8-bit inputs, as on an AVX2 CPU.

For each model (the shipped en_small in the checkout, and with ``--revisions`` the en_small of
earlier commits, read with ``git show``), on the same sentences (batch of --sentences EWT test
sentences of 20-30 tokens, and --single of them one at a time), the cosine of every token vector
of every output layer to the optimized fp32 model's, for these int8 variants:

- ``all_int8_7bit``: every linear layer int8, inputs quantized to 7 bits (reduce_range), as before
  ``precision.int8_full_range`` and ``precision.INT8_FP32_LAYERS`` existed;
- ``all_int8_full_range``: every linear layer int8, 8-bit inputs where the engine takes them;
- ``fp32_projection_7bit``: the token encoder's projection in fp32, 7-bit inputs;
- ``package``: what ``optimize_for_inference(precision="int8")`` does now;
- ``package_and_layer0_inputs_fp32``: that, and the first LSTM layer's input projections in fp32.

Also, per linear layer called as a module by the plain model (hooks; the recurrent products of the
plain model's timestep loop are not module calls), the range of its fp32 inputs and the relative
error (norm of the difference over the norm of the fp32 output) of its int8 output on those same
inputs, with 7- and 8-bit inputs. One thread; no timing.
"""
import argparse
import collections
import copy
import os
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np
import torch
from torch import nn

from spacy_elmo.bilm import BiLM
from spacy_elmo.fast import optimize_for_inference
from spacy_elmo.fast import precision as precisions
from spacy_elmo.fast.precision import ReducedPrecisionLinear, reduce_precision
from spacy_elmo.io.loading import resolve_bilm, shipped_model_dir
from spacy_elmo.records.provenance import data_record, mark_start, model_record, provenance

from .bench_bilm import machine_info
from .workloads import (
    REPO,
    add_data_options,
    bench_command,
    benchmark_sentences,
    char_batch,
    cosines,
    data_file,
    resolve_data_options, write_report,
)

MODEL_FILES = ("model.safetensors", "config.json", "MODEL_CARD.md", "vocab.txt")
ENGINES = ("x86", "fbgemm", "onednn", "qnnpack")
VARIANTS = (
    "all_int8_7bit",
    "all_int8_full_range",
    "fp32_projection_7bit",
    "package",
    "package_and_layer0_inputs_fp32",
)


def main(argv: Optional[List[str]] = None) -> Dict:
    args = parse_args(argv)
    command = bench_command("bench.int8_accuracy", argv)
    mark_start(command)
    torch.set_num_threads(1)
    started = time.time()
    test = data_file(args.test_data, "test")
    sentences, source = benchmark_sentences(args.sentences, test)
    report: Dict = {"command": command, "provenance": {}, "machine": machine_info(1)}
    report["environment"] = {name: os.environ.get(name) for name in ("FBGEMM_ENABLE_INSTRUCTIONS", "ONEDNN_MAX_CPU_ISA")}
    report["int8_full_range"] = {engine: precisions.int8_full_range(engine) for engine in ENGINES}
    report["sentences"] = {"source": source, "count": len(sentences), "single": args.single}
    report["models"] = []
    records = []
    with tempfile.TemporaryDirectory() as tmp:
        for revision in ["worktree", *args.revisions]:
            directory = shipped_model_dir() if revision == "worktree" else checkout_model(revision, Path(tmp) / revision)
            record = model_record(directory)
            if revision != "worktree":  # named as the shipped model at that commit, not by the temporary folder
                record.update(name=f"en_small at {revision}", weights=f"spacy_elmo/models/en_small/model.safetensors@{revision}")
            records.append(record)
            log(f"{revision}: {record['version']}")
            entry = {"revision": revision, "model": record}
            entry.update(measure(resolve_bilm(directory), sentences, args.single))
            report["models"].append(entry)
    report["provenance"] = provenance(model=records, data=data_record([test]))
    report["seconds"] = time.time() - started
    text = summary(report)
    print(text)
    write_report(report, None, args.json, None)
    return report


def parse_args(argv: Optional[List[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--revisions", nargs="*", default=[], metavar="COMMIT",
                        help="also measure the shipped model as these commits had it")
    parser.add_argument("--sentences", type=int, default=64)
    parser.add_argument("--single", type=int, default=20, help="sentences also run one at a time")
    parser.add_argument("--json", default=None)
    add_data_options(parser, test=True)
    return resolve_data_options(parser.parse_args(argv))


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def checkout_model(revision: str, directory: Path) -> Path:
    """The shipped model's files as ``revision`` had them, written into ``directory`` (git show;
    the checkout is not touched)."""
    directory.mkdir(parents=True)
    for name in MODEL_FILES:
        shown = subprocess.run(["git", "show", f"{revision}:spacy_elmo/models/en_small/{name}"], cwd=REPO,
                               capture_output=True, check=False)
        if shown.returncode == 0:
            (directory / name).write_bytes(shown.stdout)
        elif name in MODEL_FILES[:2]:
            raise ValueError(f"{revision} has no spacy_elmo/models/en_small/{name}: {shown.stderr.decode().strip()}")
    return directory


@contextmanager
def seven_bit_inputs() -> Iterator[None]:
    """int8 products with 7-bit inputs whatever the engine takes (the setting before the probe)."""
    saved = dict(precisions._FULL_RANGE)
    precisions._FULL_RANGE.update({engine: False for engine in ENGINES})
    try:
        yield
    finally:
        precisions._FULL_RANGE.clear()
        precisions._FULL_RANGE.update(saved)


def variant(reference: BiLM, name: str) -> BiLM:
    """The int8 model of variant ``name`` (weights shared with ``reference``)."""
    model = copy.deepcopy(reference, memo={id(p): p for p in reference.parameters()})
    optimize_for_inference(model, precision="int8")
    if name.startswith("all_int8"):
        reduce_precision(model, "int8")
    if name == "package_and_layer0_inputs_fp32":
        reduce_precision(model, "int8", keep=(*precisions.INT8_FP32_LAYERS, "forward_lstm.layers.0.input_linearity",
                                               "backward_lstm.layers.0.input_linearity"))
    return model


def token_cosines(reference: torch.Tensor, other: torch.Tensor, lengths: torch.Tensor) -> np.ndarray:
    """(layers, tokens) cosines of each token vector to the reference's."""
    return np.concatenate([cosines(reference[:, row, :n].numpy(), other[:, row, :n].numpy())
                           for row, n in enumerate(lengths.tolist())], axis=1)


def summarize(values: np.ndarray) -> Dict:
    return {"cosine_mean": float(values.mean()), "cosine_min": float(values.min()),
            "by_layer_mean": [float(v) for v in values.mean(1)], "by_layer_min": [float(v) for v in values.min(1)]}


def measure(plain: BiLM, sentences: Sequence[Sequence[str]], single: int) -> Dict:
    plain.eval()
    chars = plain.config.max_characters_per_token
    runs = {"batch": [char_batch(sentences, chars)], "single": [char_batch([s], chars) for s in sentences[:single]]}
    reference = optimize_for_inference(copy.deepcopy(plain))
    result: Dict = {"variants": {}, "linear_layers": linear_errors(plain, runs["batch"][0])}
    with torch.no_grad():
        expected = {key: [reference(*run).layers for run in value] for key, value in runs.items()}
        for name in VARIANTS:
            model = variant(reference, name)
            with seven_bit_inputs() if name.endswith("7bit") else nullcontext():
                entry = {}
                for key, value in runs.items():
                    got = [model(*run).layers for run in value]
                    entry[key] = summarize(np.concatenate(
                        [token_cosines(e, g, run[1]) for e, g, run in zip(expected[key], got, value)], axis=1))
            entry["fp32_layers"] = sorted(n for n, m in model.named_modules()
                                          if isinstance(m, nn.Linear) and not isinstance(m, ReducedPrecisionLinear))
            result["variants"][name] = entry
            log(f"  {name}: batch {entry['batch']['cosine_mean']:.6f} (min {entry['batch']['cosine_min']:.4f}), "
                f"single {entry['single']['cosine_mean']:.6f}")
    config = plain.config
    f, p, d = config.n_filters, config.projection_dim, config.dim
    result["multiply_adds"] = {  # where keeping the token projection in fp32 costs
        "token_projection_per_uncached_token": f * p,
        "lstm_per_position": 2 * config.n_layers * (p * 4 * d + p * 4 * d + d * p),
    }
    return result


def linear_errors(plain: BiLM, run: Tuple[torch.Tensor, torch.Tensor]) -> Dict:
    """Per linear layer called as a module: the range of its fp32 inputs and the relative error of
    int8 products (7- and 8-bit inputs) on them, mean over calls."""
    inputs: Dict[str, List[torch.Tensor]] = collections.defaultdict(list)
    modules = dict(plain.named_modules())
    hooks = [module.register_forward_hook(
        (lambda name: lambda _m, given, _out: inputs[name].append(given[0].detach().reshape(-1, given[0].shape[-1])))(name))
        for name, module in modules.items() if type(module) is nn.Linear]
    try:
        with torch.no_grad():
            plain(*run)
    finally:
        for hook in hooks:
            hook.remove()
    out: Dict = {}
    for name, xs in sorted(inputs.items()):
        layer = modules[name]
        packed = precisions._pack_int8(layer.weight.detach().float().contiguous(),
                                       None if layer.bias is None else layer.bias.detach().float().contiguous())
        errors: Dict[str, List[float]] = {"7bit": [], "8bit": []}
        for x in xs:
            with torch.no_grad():
                y = nn.functional.linear(x, layer.weight, layer.bias)
                for key, reduce_range in (("7bit", True), ("8bit", not precisions.int8_full_range())):
                    q = torch.ops.quantized.linear_dynamic(x.contiguous(), packed, reduce_range=reduce_range)
                    errors[key].append(float((q - y).norm() / y.norm().clamp(min=1e-30)))
        flat = torch.cat([x.flatten() for x in xs])
        out[name] = {"calls": len(xs), "input_min": float(flat.min()), "input_max": float(flat.max()),
                     "input_abs_median": float(flat.abs().median()),
                     "relative_error_7bit": float(np.mean(errors["7bit"])),
                     "relative_error_8bit": float(np.mean(errors["8bit"]))}
    return out


def summary(report: Dict) -> str:
    lines = [f"int8_full_range: {report['int8_full_range']} (environment {report['environment']})"]
    for entry in report["models"]:
        lines.append(f"{entry['revision']} ({entry['model']['version']}):")
        for name, v in entry["variants"].items():
            lines.append(f"  {name:32s} batch {v['batch']['cosine_mean']:.6f} (min {v['batch']['cosine_min']:.4f})"
                         f"  single {v['single']['cosine_mean']:.6f} (min {v['single']['cosine_min']:.4f})")
        for name, v in entry["linear_layers"].items():
            lines.append(f"  {name:40s} inputs [{v['input_min']:.2f}, {v['input_max']:.2f}] median |x| "
                         f"{v['input_abs_median']:.3f}: error 7-bit {v['relative_error_7bit']:.4f}, "
                         f"8-bit {v['relative_error_8bit']:.4f}")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
