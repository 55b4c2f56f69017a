"""Choosing a biLM's default token vectors (``bilm.VectorSetting``) by WiC train accuracy: what
``python -m spacy_elmo vectors`` runs (and the lab's ``lab.release.sense_vectors`` for a release).

Candidates: every mix of the L+1 layers on a 0.1-step grid (``representations.simplex_weights``),
each as it is and with each layer's mean over a corpus taken off, and the plain mean of the
layers (the default before). Each is scored on every WiC train pair with the cosine threshold
that is best on them (``sense.best_threshold``); the best (the first in that order on a tie)
becomes the setting. WiC dev is then scored with the chosen setting and with the previous
default, each at its own train threshold, and the sense example of docs/neighbors.md is run
through the ``elmo`` component itself, with ``vectors = "plain"`` (before) and the new setting
(after).
"""
import json
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..bilm import VectorSetting
from ..io.loading import resolve_bilm
from ..io.native import read_config
from ..io.vector_file import write_vector_setting
from ..records.provenance import data_record, model_record, portable_path, provenance
from .features import VectorCache
from .representations import simplex_weights, unit
from .sense import best_threshold, pair_vectors
from .wic import read_wic, wic_data_file

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


def sense_example(setting: Optional[VectorSetting], bilm, create_pipeline: Callable[..., Any]) -> Dict[str, Any]:
    """The example's similarities through the component: ``vectors = "plain"`` when ``setting`` is None.

    create_pipeline (Callable): ``spacy_elmo.pipeline.create_pipeline``, given by the entry point (the
        component sits above the probes, which do not import it).
    """
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


def choose_vectors(
    model: Path, wic: Path, corpus: Sequence[Path], create_pipeline: Callable[..., Any], *, output: Optional[Path] = None, write: bool = False,
    licences: str = "", command: str = "python -m spacy_elmo vectors",
) -> Tuple[Dict[str, Any], VectorSetting]:
    """Choose ``model``'s default vectors on WiC train (``wic``: a folder holding train/ and dev/),
    the layer means over ``corpus`` (text, a sentence a line).

    create_pipeline (Callable): ``spacy_elmo.pipeline.create_pipeline``, which runs the sense example
        through the component (given by the caller: the probes do not import the component).

    output (Optional[Path]): where the record goes (JSON), also named in the setting's provenance.
    write (bool): write the setting into ``model``'s vectors.json.
    licences (str): the corpus's licences, for the record.
    RETURNS (Tuple[Dict[str, Any], VectorSetting]): the record and the chosen setting.
    """
    start = time.monotonic()
    bilm = resolve_bilm(model)
    weights_sha256 = read_config(model)["weights_sha256"]
    train_pairs, dev_pairs = read_wic(wic / "train"), read_wic(wic / "dev")  # a missing file before the work
    cache = VectorCache(bilm, model_hash=weights_sha256)
    means, n_sentences, n_tokens = layer_means(cache, corpus)
    train = pair_vectors(train_pairs, cache, wic_data_file(wic / "train"), "wic train")
    dev = pair_vectors(dev_pairs, cache, wic_data_file(wic / "dev"), "wic dev")
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
        provenance={"chosen_by": "WiC train accuracy, threshold tuned on train",
                    "record": portable_path(output) if output is not None else None,
                    "command": f"{command} --model {portable_path(model)} ...",
                    **({"means": {"corpus": [portable_path(p) for p in corpus], "licences": licences,
                                  "sentences": n_sentences, "tokens": n_tokens}} if centred else {})},
    )
    before, after = sense_example(None, bilm, create_pipeline), sense_example(setting, bilm, create_pipeline)
    record = {
        "what": "the default token vectors of the elmo component for this biLM, chosen by WiC train accuracy",
        "chosen": {k: v for k, v in best.items() if k != "_candidate"},
        "previous_default": {k: v for k, v in scored[0].items() if k != "_candidate"},
        "wic_dev": {"chosen": dev_accuracy(best), "previous_default": dev_accuracy(scored[0]), "pairs": len(dev_pairs)},
        "wic_train_pairs": len(train_pairs),
        "corpus": {"files": [portable_path(p) for p in corpus], "licences": licences,
                   "sentences": n_sentences, "tokens": n_tokens},
        "sense_example": {"sentences": [{"sense": s, "text": t} for s, t in SENSE_EXAMPLE],
                          "before": before, "after": after},
        "candidates": [{k: v for k, v in row.items() if k != "_candidate"} for row in scored],
        "seconds": round(time.monotonic() - start, 1),
    }
    data_files = [*corpus, *(wic_data_file(wic / s) for s in ("train", "dev"))]
    data_files += [f.with_name(f.name.replace(".data.txt", ".gold.txt")) for f in data_files[-2:]]
    record["provenance"] = provenance(model=model_record(model), data=data_record(data_files))
    if output is not None:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    if write:
        write_vector_setting(setting, model)
    return record, setting
