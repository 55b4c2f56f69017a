"""Choose a biLM's default token vectors by WiC train accuracy and store them beside its weights.

    python -m lab.release.sense_vectors --model spacy_elmo/models/en_small --wic assets/datasets/wic \\
        --output results/en_small/VERSION/sense-vectors.json --write

Candidates: every mix of the L+1 layers on a 0.1-step grid (``probes.representations.simplex_weights``),
each as it is and with each layer's mean over a corpus taken off (``--corpus``: by default the
open-licence sample this repository carries, ``corpus_sample/``: Gutenberg, movie reviews, EWT
train text), and the plain mean of the layers (the default before). Each is scored on every WiC
train pair with the cosine threshold that is best on them (``probes.sense.best_threshold``); the
best (the first in that order on a tie) becomes the model's ``vectors.json`` with ``--write``. WiC
dev is then scored with the chosen setting and with the previous default, each at its own train
threshold, and the sense example of docs/neighbors.md is run through the ``elmo`` component
itself, with ``vectors = "plain"`` (before) and the new setting (after). The record is written
through ``spacy_elmo.records.provenance`` (run it from a clean checkout).
"""
import argparse
import json
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from spacy_elmo.bilm import VectorSetting
from spacy_elmo.io.loading import resolve_bilm
from spacy_elmo.io.native import read_config
from spacy_elmo.io.vector_file import write_vector_setting
from spacy_elmo.pipeline import create_pipeline
from spacy_elmo.probes.features import VectorCache
from spacy_elmo.probes.representations import simplex_weights, unit
from spacy_elmo.probes.sense import best_threshold, pair_vectors
from spacy_elmo.probes.wic import read_wic, wic_data_file
from spacy_elmo.records.provenance import data_record, mark_start, model_record, portable_path, provenance

CORPUS = (
    "corpus_sample/pretrain/train/train-00.txt",
    "corpus_sample/pretrain/train/train-01.txt",
    "corpus_sample/domain/ewt-train.txt",
)
CORPUS_LICENCES = "public domain (Gutenberg), CC BY 4.0 (movie reviews), CC BY-SA 4.0 (UD EWT): corpus_sample/ATTRIBUTION.md"
# the README's two sentences and one more of each sense, "bank" closing each as in the README's
SENSE_EXAMPLE = (
    ("money", "I deposited cash at the bank."),
    ("money", "She withdrew money from the bank."),
    ("river", "We sat on the river bank."),
    ("river", "Fish swam near the muddy river bank."),
)
Candidate = Tuple[Tuple[float, ...], bool]


def layer_means(cache: VectorCache, files: Sequence[Path]) -> Tuple[np.ndarray, int, int]:
    """RETURNS (Tuple[np.ndarray, int, int]): each layer's mean over every token of the files'
    lines (whitespace-tokenized sentences), (L+1, width) float32; the sentences and tokens."""
    total, tokens, sentences = None, 0, 0
    for path in files:
        lines = [tuple(line.split()) for line in path.read_text(encoding="utf-8").splitlines() if line.split()]
        for layers in cache.layers(lines, source=path, label=path.name):
            summed = layers.astype(np.float64).sum(axis=1)
            total = summed if total is None else total + summed
            tokens += layers.shape[1]
        sentences += len(lines)
    return (total / tokens).astype(np.float32), sentences, tokens


def similarities(pair: Tuple[np.ndarray, np.ndarray], candidate: Candidate, means: np.ndarray) -> np.ndarray:
    """Cosine of the two targets' vectors under a candidate (weights, means taken off or not)."""
    weights, centred = np.asarray(candidate[0]), candidate[1]
    offset = weights @ means if centred else 0.0
    first, second = (np.tensordot(weights, side, axes=1) - offset for side in pair)
    return np.sum(unit(first) * unit(second), axis=-1)


def sense_example(setting: Optional[VectorSetting], bilm) -> Dict[str, Any]:
    """The example's similarities through the component: ``vectors = "plain"`` when ``setting`` is None."""
    bilm.vector_setting = setting
    nlp = create_pipeline(bilm, config={"set_vector_hooks": True, "vectors": "model" if setting else "plain"})
    banks = [next(t for t in nlp(text) if t.text == "bank") for _, text in SENSE_EXAMPLE]
    pairs = []
    for i in range(len(banks)):
        for j in range(i + 1, len(banks)):
            same = SENSE_EXAMPLE[i][0] == SENSE_EXAMPLE[j][0]
            pairs.append({"first": i, "second": j, "same_sense": same, "similarity": round(banks[i].similarity(banks[j]), 4)})
    lowest_same = min(p["similarity"] for p in pairs if p["same_sense"])
    highest_cross = max(p["similarity"] for p in pairs if not p["same_sense"])
    return {"pairs": pairs, "lowest_same_sense": lowest_same, "highest_cross_sense": highest_cross,
            "senses_apart": lowest_same > highest_cross}


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, required=True, help="our model directory (config.json + model.safetensors)")
    parser.add_argument("--wic", type=Path, required=True, help="the WiC release: a folder holding train/ and dev/")
    parser.add_argument("--corpus", type=Path, nargs="+", default=[Path(p) for p in CORPUS], help="text, a sentence a line")
    parser.add_argument("--output", type=Path, required=True, help="the record (JSON)")
    parser.add_argument("--write", action="store_true", help="write the chosen setting into MODEL/vectors.json")
    args = parser.parse_args(argv)
    mark_start()
    start = time.monotonic()
    bilm = resolve_bilm(args.model)
    weights_sha256 = read_config(args.model)["weights_sha256"]
    train_pairs, dev_pairs = read_wic(args.wic / "train"), read_wic(args.wic / "dev")  # a missing file before the work
    cache = VectorCache(bilm, model_hash=weights_sha256)
    means, n_sentences, n_tokens = layer_means(cache, args.corpus)
    train = pair_vectors(train_pairs, cache, wic_data_file(args.wic / "train"), "wic train")
    dev = pair_vectors(dev_pairs, cache, wic_data_file(args.wic / "dev"), "wic dev")
    y_train, y_dev = np.array([p.same for p in train_pairs]), np.array([p.same for p in dev_pairs])

    n_layers = bilm.config.n_output_layers
    previous: Candidate = ((1.0 / n_layers,) * n_layers, False)
    candidates: List[Candidate] = [previous] + [(w, c) for c in (False, True) for w in simplex_weights(n_layers)]
    scored = []
    for candidate in candidates:
        threshold, accuracy = best_threshold(similarities(train, candidate, means), y_train)
        scored.append({"layer_weights": [round(w, 4) for w in candidate[0]], "means_taken_off": candidate[1],
                       "wic_train": round(accuracy, 2), "threshold": round(threshold, 4), "_candidate": candidate})
    best = max(scored, key=lambda row: row["wic_train"])

    def dev_accuracy(row: Dict[str, Any]) -> float:
        said_same = similarities(dev, row["_candidate"], means) > row["threshold"]
        return round(100.0 * float(np.mean(said_same == y_dev)), 2)

    weights, centred = best["_candidate"]
    setting = VectorSetting(
        layer_weights=weights, layer_means=means if centred else None, weights_sha256=weights_sha256,
        provenance={"chosen_by": "WiC train accuracy, threshold tuned on train", "record": portable_path(args.output),
                    "command": f"python -m lab.release.sense_vectors --model {portable_path(args.model)} ...",
                    **({"means": {"corpus": [portable_path(p) for p in args.corpus], "licences": CORPUS_LICENCES,
                                  "sentences": n_sentences, "tokens": n_tokens}} if centred else {})},
    )
    before, after = sense_example(None, bilm), sense_example(setting, bilm)
    record = {
        "what": "the default token vectors of the elmo component for this biLM, chosen by WiC train accuracy",
        "chosen": {k: v for k, v in best.items() if k != "_candidate"},
        "previous_default": {k: v for k, v in scored[0].items() if k != "_candidate"},
        "wic_dev": {"chosen": dev_accuracy(best), "previous_default": dev_accuracy(scored[0]), "pairs": len(dev_pairs)},
        "wic_train_pairs": len(train_pairs),
        "corpus": {"files": [portable_path(p) for p in args.corpus], "licences": CORPUS_LICENCES,
                   "sentences": n_sentences, "tokens": n_tokens},
        "sense_example": {"sentences": [{"sense": s, "text": t} for s, t in SENSE_EXAMPLE],
                          "before": before, "after": after},
        "candidates": [{k: v for k, v in row.items() if k != "_candidate"} for row in scored],
        "seconds": round(time.monotonic() - start, 1),
    }
    data_files = [*args.corpus, *(wic_data_file(args.wic / s) for s in ("train", "dev"))]
    data_files += [f.with_name(f.name.replace(".data.txt", ".gold.txt")) for f in data_files[-2:]]
    record["provenance"] = provenance(model=model_record(args.model), data=data_record(data_files))
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    if args.write:
        write_vector_setting(setting, args.model)
    print(f"chosen {record['chosen']}; WiC dev {record['wic_dev']}; example before {before['senses_apart']}, "
          f"after {after['senses_apart']}; {args.output}")


if __name__ == "__main__":
    main()
