"""Every inference path against the exact math on full windows and deep stacks: results/parity-deep.json.

Random published-format models (48 cells, projection 12, filters [[1,4],[2,6],[4,10]], clips 1.0
/ 0.5) of 3 and 4 LSTM layers, each on one sentence of 200 tokens (the component's window),
are run by every inference path in float32 and compared with the reference loop in float64.
Two weight regimes: "stable" (small recurrent weights, as tests/fast/test_default_path_parity.py
uses: rounding differences shrink over time) and "chaotic" (recurrent weights large enough
that they grow: there no float32 computation, the reference's included, stays within 1e-5 of
the exact math on every model, so the 1e-5 contract cannot be promised for such weights).

    python -m lab.reliability.parity_deep --output results/parity-deep.json [--models 10]
"""
import argparse
import copy
import json
from pathlib import Path

import numpy as np
import torch

from spacy_elmo.bilm import BiLM, BiLMConfig, batch_char_ids
from spacy_elmo.fast import kernel_library, optimize_for_inference, python_step
from spacy_elmo.records.provenance import mark_start, portable_path, provenance

WORDS = "the bank raised its rates while we sat on the river bank all afternoon and talked of money .".split()
REGIMES = {
    "stable": {"input_linearity": 3.0, "state_linearity": 0.6, "projection": 1.5},
    "chaotic": {"input_linearity": 3.0, "state_linearity": 2.0, "projection": 1.5},
}


def build(n_layers: int, seed: int, scales: dict) -> BiLM:
    config = BiLMConfig(
        char_embedding_dim=8, filters=((1, 4), (2, 6), (4, 10)), n_highway=1, dim=48, projection_dim=12,
        n_layers=n_layers, cell_clip=1.0, proj_clip=0.5,
    )
    torch.manual_seed(seed)
    bilm = BiLM(config)
    with torch.no_grad():
        for name, param in bilm.named_parameters():
            kind = next((k for k in scales if f".{k}." in name), None)
            if "lstm" in name and kind is not None and param.dim() == 2:
                param.normal_(0, scales[kind] / param.shape[1] ** 0.5)
    return bilm.eval()


def errors(bilm: BiLM, words: list) -> dict:
    ids, lengths = (torch.from_numpy(a) for a in batch_char_ids([words]))
    with torch.no_grad():
        exact = copy.deepcopy(bilm).double()(ids, lengths).layers
        optimized = optimize_for_inference(copy.deepcopy(bilm))
        with python_step():
            python_loop = optimized(ids, lengths).layers
        paths = {
            "reference": bilm(ids, lengths).layers,
            "exact": optimize_for_inference(copy.deepcopy(bilm), exact=True)(ids, lengths).layers,
            "default (optimized)": optimized(ids, lengths).layers,
            "optimized, Python loop": python_loop,
        }
    return {name: float((got.double() - exact).abs().max()) for name, got in paths.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, default=Path("results/parity-deep.json"))
    parser.add_argument("--models", type=int, default=10, help="random models per regime and depth")
    args = parser.parse_args()
    mark_start(f"python -m lab.reliability.parity_deep --output {portable_path(args.output)} --models {args.models}")
    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    table = {}
    for regime, scales in REGIMES.items():
        for n_layers in (3, 4):
            runs = []
            for seed in range(args.models):
                words = [WORDS[i] for i in rng.integers(0, len(WORDS), 200)]
                runs.append(errors(build(n_layers, seed, scales), words))
            summary = {
                path: {"max": max(r[path] for r in runs), "median": float(np.median([r[path] for r in runs])),
                       "over_1e-5": sum(r[path] > 1e-5 for r in runs)}
                for path in runs[0]
            }
            table[f"{regime}, {n_layers} layers"] = summary
            print(regime, n_layers, {k: f"{v['max']:.2e}" for k, v in summary.items()}, flush=True)
    record = {
        "what": "largest |float32 path - float64 reference loop| over all layers and 200 tokens, per model",
        "models_per_row": args.models,
        # file names only: where the cache and the compiler lie is the machine's business
        "compiled_loop": {k: Path(v).name if k in ("library", "record", "compiler") and v else v
                          for k, v in kernel_library.status().items()},
        "table": table,
        "provenance": provenance(
            model=None, model_note="random published-format models built by the script (seeds 0..models-1 per row)",
            data={}, data_note="sentences of 200 words drawn by a seeded generator from the script's own word list",
        ),
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
