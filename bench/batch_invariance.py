"""Is a sentence's vector the same alone and in a batch? The shipped model on fresh instances, per route.

    python -m bench.batch_invariance --json results/bench/MACHINE/batch-invariance.json

The first ``--sentences`` sentences of ``--data`` (default: the shipped sample of UD EWT's training
set): each embedded alone (``embed([s])``) by one instance of the shipped biLM, and all of them in
batches of ``--batch-size`` by a second instance (within one instance the char-CNN cache would hand
back the encodings computed before), both optimized as ``load_bilm`` optimizes (fp32, a char cache of
``--char-cache`` entries, filled as tokens are seen), at ``--threads`` threads. Then a second pass of
the batched instance over the first sentences (from its cache). For each fp32 route setting
(``spacy_elmo.fast.prepacked``: the routes this machine chose, oneDNN's in both regimes, torch's in
both), the record gives how many sentences are bitwise equal and the largest difference.
"""
import argparse
import time
from pathlib import Path
from typing import Dict, List, Optional

import numpy as np
import torch

from spacy_elmo.fast import optimize_for_inference, prepacked
from spacy_elmo.fast.optimize import use_routes
from spacy_elmo.io.loading import resolve_bilm
from spacy_elmo.records.provenance import data_record, mark_start, model_record, provenance

from .workloads import REPO, bench_command, conllu_sentences, display_path, write_report


def main(argv: Optional[List[str]] = None) -> Dict:
    args = parse_args(argv)
    report: Dict = {"command": bench_command("bench.batch_invariance", argv)}
    mark_start(report["command"])
    torch.set_num_threads(args.threads)
    sentences = conllu_sentences(args.data)[: args.sentences]
    report["sentences"] = {"source": f"{display_path(args.data)}, first {len(sentences)}", "count": len(sentences),
                           "tokens": sum(map(len, sentences))}
    report["settings"] = {"batch_size": args.batch_size, "char_cache_size": args.char_cache, "threads": args.threads}
    report["routes"] = {}
    for name in ("as chosen", "onednn", "torch"):
        started = time.time()

        def fresh():
            bilm = optimize_for_inference(resolve_bilm(), char_cache_size=args.char_cache)
            if name == "onednn":
                use_routes(bilm, prepacked.Routes(prepacked.ONEDNN, prepacked.ONEDNN))
            elif name == "torch":
                use_routes(bilm, prepacked.TORCH_ROUTES)
            return bilm

        alone_model, batch_model = fresh(), fresh()
        with torch.no_grad():
            alone = [alone_model.embed([sentence])[0] for sentence in sentences]
            batched = batch_model.embed(sentences, batch_size=args.batch_size)
            again = batch_model.embed(sentences[: args.batch_size], batch_size=args.batch_size)
        report["routes"][name] = {
            "routes": dict(batch_model.runner.routes._asdict()),
            "bitwise_equal": sum(np.array_equal(a, b) for a, b in zip(alone, batched)),
            "max_abs_difference": float(max(np.abs(a - b).max() for a, b in zip(alone, batched))),
            "from_cache_bitwise_equal": sum(np.array_equal(a, b) for a, b in zip(alone, again)),
            "from_cache_max_abs_difference": float(max(np.abs(a - b).max() for a, b in zip(alone, again))),
            "seconds": time.time() - started,
        }
        print(name, report["routes"][name], flush=True)
    report["provenance"] = provenance(model=model_record(), data=data_record([args.data]))
    write_report(report, None, args.json, None)
    return report


def parse_args(argv: Optional[List[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=REPO / "sample" / "ewt" / "train.conllu")
    parser.add_argument("--sentences", type=int, default=301)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--char-cache", type=int, default=20000)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--json", default=None)
    return parser.parse_args(argv)


if __name__ == "__main__":
    main()
