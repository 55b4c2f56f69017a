"""Soak test of the `elmo` component: RSS while ``nlp.pipe`` streams many short Docs.

    python -m lab.reliability.soak_long --docs 100000 --output results/reliability/soak.json

Builds a pipeline around the biLM in --bilm DIR (default: the tiny random-weight fixture model
in the checkout's tests/data/allennlp/tiny), or loads --model DIR, streams --docs generated short texts
through ``nlp.pipe`` without keeping the Docs, samples RSS with psutil, and checks every Doc
holds numpy (no torch tensors) on ``doc._.elmo``. Prints a JSON summary (every RSS sample, the
final one after the run included; with --output FILE also written there, with the results
record of ``spacy_elmo.records.provenance``, the model's files' SHA-256 and which timestep loop ran); exits 1 if RSS grows
more than --max-growth percent after the warm-up, at the last sample or any other, or a Doc
holds a torch object.

Two caches grow by design until they are full, so a run shows flat memory only once they are: the
frozen biLM's layers of every distinct sentence (``frozen_cache_mb``, 512 MB by default; set it
with --frozen-cache-mb, 0 turns it off) and the char-CNN cache (20,000 tokens), with spaCy's
StringStore (a small --vocab-size fills both of the latter within the warm-up).
"""
import argparse
import json
import sys
from pathlib import Path
from typing import Optional, Sequence

import spacy
import torch

from spacy_elmo.records.provenance import mark_start, model_record, portable_path, provenance
from spacy_elmo.pipeline import create_pipeline

from lab import CHECKOUT
from lab.records.gather import model_files
from lab.records.inference import inference_path
from lab.reliability.fuzz import load_or_exit
from lab.reliability.soak import short_texts, soak

# the tiny random-weight model of the published format that the tests use, in the checkout
TINY_FIXTURE = CHECKOUT / "tests" / "data" / "allennlp" / "tiny"


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=100000)
    parser.add_argument("--warmup", type=float, default=0.1, help="fraction of the Docs before growth is measured")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--vocab-size", type=int, default=20000, help="made-up words the texts draw from; "
                        "a small one fills spaCy's StringStore and the char-CNN cache within the warm-up")
    parser.add_argument("--sample-every", type=int, default=1000, help="Docs between RSS samples")
    parser.add_argument("--model", type=Path, default=None, help="a pipeline directory (default: one around --bilm)")
    parser.add_argument("--bilm", type=Path, default=TINY_FIXTURE, help="a biLM directory (default: %(default)s)")
    parser.add_argument("--max-growth", type=float, default=5.0, help="percent RSS growth allowed after warm-up")
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--frozen-cache-mb", type=float, default=None,
                        help="with --bilm: the component's frozen_cache_mb (default: the component's default)")
    parser.add_argument("--output", type=Path, default=None, help="also write the JSON summary here")
    args = parser.parse_args(argv)
    mark_start()
    torch.set_num_threads(args.threads)
    model_settings = {} if args.frozen_cache_mb is None else {"frozen_cache_mb": args.frozen_cache_mb}
    if args.model:
        nlp = spacy.load(args.model)
    else:
        nlp = create_pipeline(load_or_exit(args.bilm)(), config={"model": model_settings})
    warmup = max(1, int(args.docs * args.warmup))
    texts = short_texts(args.docs, vocab_size=args.vocab_size)
    result = soak(nlp, texts, n_docs=args.docs, warmup=warmup, batch_size=args.batch_size,
                  sample_every=args.sample_every)
    ok = result.peak_growth_pct < args.max_growth and result.docs_with_torch_objects == 0
    source = portable_path(args.model) if args.model else f"a pipeline around the biLM in {portable_path(args.bilm)}"
    record = {**provenance(model=model_record(args.model or args.bilm), data={},
                           data_note=f"generated texts: {args.docs} short Docs over {args.vocab_size} made-up words"),
              "inference": inference_path(), "model_files": model_files(args.model or args.bilm)}
    summary = {"provenance": record, "pipeline": source, "vocab_size": args.vocab_size,
               "frozen_cache_mb": args.frozen_cache_mb, "max_growth_pct": args.max_growth, "passed": ok,
               **result.to_dict()}
    print(json.dumps(summary))
    if args.output is not None:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
