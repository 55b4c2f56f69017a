"""Numerical parity with the reference implementations, measured and written to a results file.

    python -m lab.reliability.parity --output results/parity.json

Runs the reference fixtures in tests/data/allennlp (see its README): the 18 sentences of
AllenNLP's ELMo with random weights (tiny/), each alone, with and without <S>/</S>, all in one
batch in both orders, the equal-weight scalar mix, and the same with ``optimize_for_inference``;
the ten batches that bilm-tf's trained fixture model (trained/) ran statefully, plus its first
batch from a zero state; and ELMoForManyLangs' own outputs for its fixture model and the variants
in tests/data/elmoformanylangs, plain and optimized. Writes the largest absolute difference of each check, with the SHA-256
of the fixtures' files and which timestep loop the ``optimize_for_inference`` checks (the default
inference path) ran; exits 1 if one is above --tolerance (the contract: 1e-5 on float32 CPU).
"""
import argparse
import json
import sys
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

import h5py
import numpy as np
import torch

from spacy_elmo.bilm import BiLM, ScalarMix
from spacy_elmo.fast import optimize_for_inference
from spacy_elmo.io import load_allennlp
from spacy_elmo.records.provenance import data_record, mark_start, model_record, provenance

from lab import CHECKOUT
from lab.records.gather import model_files
from lab.records.inference import inference_path

FIXTURES = CHECKOUT / "tests" / "data" / "allennlp"


def max_diff(outputs: Sequence[np.ndarray], expected: Sequence[np.ndarray]) -> float:
    return max(float(np.abs(o - e).max()) if o.size else 0.0 for o, e in zip(outputs, expected))


def tiny_checks(folder: Path) -> Dict[str, Dict]:
    """AllenNLP 2.10.1's outputs for the tiny random-weight model."""
    sentences = json.loads((folder / "sentences.json").read_text(encoding="utf-8"))["tokens"]
    with np.load(folder / "expected.npz") as data:
        expected = {k: data[k] for k in data.files}
    layers = [expected[f"layers_{i}"] for i in range(len(sentences))]
    checks = {}
    for name, optimize in (("", False), (" (optimize_for_inference fp32)", True)):
        bilm = load_allennlp(folder / "options.json", folder / "weights.hdf5")
        if optimize:
            optimize_for_inference(bilm)
        alone = [bilm.embed([s])[0] for s in sentences]
        bounded = [bilm.embed([s], boundaries=True)[0] for s in sentences]
        order = list(range(len(sentences)))
        batch = bilm.embed(sentences, batch_size=len(sentences))
        reverse = bilm.embed([sentences[i] for i in reversed(order)], batch_size=len(sentences))[::-1]
        checks[f"each sentence alone{name}"] = max_diff(alone, layers)
        checks[f"each sentence alone, with <S> and </S>{name}"] = max_diff(
            bounded, [expected[f"layers_with_boundaries_{i}"] for i in order]
        )
        checks[f"all in one batch{name}"] = max_diff(batch, layers)
        checks[f"all in one batch, reversed order{name}"] = max_diff(reverse, layers)
        if not optimize:
            mix = ScalarMix(len(layers[0]))
            with torch.no_grad():
                mixed = [mix(torch.from_numpy(x)[:, None])[0].numpy() for x in alone]
            checks["equal-weight scalar mix (ELMo vector)"] = max_diff(mixed, [expected[f"elmo_{i}"] for i in order])
    return {k: {"max_abs_diff": v, "sentences": len(sentences)} for k, v in checks.items()}


def trained_batches(folder: Path) -> Iterator[Tuple[List[List[str]], List[np.ndarray]]]:
    """bilm-tf's stateful run: batch i holds sentence i of each of the three lists."""
    sentences = json.loads((folder / "sentences.json").read_text(encoding="utf-8"))
    files = [h5py.File(folder / f"lm_embeddings_{k}.hdf5", "r") for k in range(len(sentences))]
    for i in range(len(sentences[0])):
        tokens = [sentences[k][i].split() for k in range(len(sentences))]
        tops = [np.concatenate(list(f[str(i)][...]), axis=-1) for f in files]
        yield tokens, tops


def trained_checks(folder: Path) -> Dict[str, Dict]:
    """The top layer of bilm-tf's trained fixture model (AllenNLP's test fixture)."""
    batches = list(trained_batches(folder))
    bilm: BiLM = load_allennlp(folder / "options.json", folder / "lm_weights.hdf5")
    tokens, tops = batches[0]
    first = max_diff([x[-1] for x in bilm.embed(tokens)], tops)
    bilm.stateful = True
    stateful = max(max_diff([x[-1] for x in bilm.embed(t, batch_size=len(t))], e) for t, e in batches)
    return {
        "first batch from a zero state, top layer": {"max_abs_diff": first, "batches": 1},
        "all batches, state carried between calls (stateful), top layer": {
            "max_abs_diff": stateful,
            "batches": len(batches),
        },
    }


def efml_cases(folder: Path) -> List[Tuple[str, Path, Path]]:
    """(name, model directory, golden outputs) of ELMoForManyLangs' fixture model and its variants."""
    return [("fixture", folder / "model", folder / "golden.npz")] + [
        (f"variant {v.name}", v / "model", v / "golden.npz") for v in sorted((folder / "variants").glob("*"))
        if (v / "model" / "encoder.pkl").is_file() and v.name != "words-only"  # refused: no char CNN
    ]


def efml_checks(folder: Path) -> Dict[str, Dict]:
    """ELMoForManyLangs 0.0.4.post2's own outputs for its fixture model (and its variants)."""
    from spacy_elmo.io import load_efml

    sentences = json.loads((folder / "sentences.json").read_text(encoding="utf-8"))
    checks = {}
    for name, model, golden in efml_cases(folder):
        with np.load(golden) as data:
            expected = [data[f"layers_{i}"] for i in range(len(sentences))]
        for label, optimize in (("", False), (" (optimize_for_inference fp32)", True)):
            bilm = load_efml(model)
            if optimize:
                optimize_for_inference(bilm)
            alone = [bilm.embed([s])[0] for s in sentences]
            checks[f"{name}: each sentence alone{label}"] = {"max_abs_diff": max_diff(alone, expected), "sentences": len(sentences)}
    return checks


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fixtures", type=Path, default=FIXTURES, help="folder with tiny/ and trained/")
    parser.add_argument("--tolerance", type=float, default=1e-5)
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--output", type=Path, default=None, help="write the results as JSON here")
    args = parser.parse_args(argv)
    mark_start()
    torch.set_num_threads(args.threads)
    checks = {
        "tiny (AllenNLP 2.10.1, random weights)": tiny_checks(args.fixtures / "tiny"),
        "trained (bilm-tf, AllenNLP's test fixture)": trained_checks(args.fixtures / "trained"),
        "ELMoForManyLangs 0.0.4.post2": efml_checks(args.fixtures.parent / "elmoformanylangs"),
    }
    worst = max(c["max_abs_diff"] for group in checks.values() for c in group.values())
    tiny, trained, efml = args.fixtures / "tiny", args.fixtures / "trained", args.fixtures.parent / "elmoformanylangs"
    models = [model_record(options=tiny / "options.json", weights=tiny / "weights.hdf5"),
              model_record(options=trained / "options.json", weights=trained / "lm_weights.hdf5")]
    models += [model_record(model) for _, model, _ in efml_cases(efml)]
    data = [tiny / "sentences.json", tiny / "expected.npz", trained / "sentences.json",
            *sorted(trained.glob("lm_embeddings_*.hdf5")), efml / "sentences.json", *(g for _, _, g in efml_cases(efml))]
    record = {**provenance(model=models, data=data_record(data)), "inference": inference_path(),
              "model_files": [model_files(tiny), model_files(trained), model_files(efml / "model")]}
    result = {"provenance": record, "tolerance": args.tolerance, "max_abs_diff": worst, "checks": checks}
    for group, found in checks.items():
        for name, check in found.items():
            print(f"{check['max_abs_diff']:.1e}  {group}: {name}")
    if args.output is not None:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0 if worst <= args.tolerance else 1


if __name__ == "__main__":
    sys.exit(main())
