"""Long fuzz run of the `elmo` component: the checks of tests/reliability/test_component_fuzz.py
over many more generated Docs than CI affords.

    python -m lab.reliability.fuzz_long --docs 10000 --output results/reliability/fuzz.json

Generates batches of messy Docs with hypothesis (any non-surrogate code point, control
characters, combining marks, emoji ZWJ sequences, whitespace tokens, raw text through the
tokenizer, sentence starts, Docs up to thousands of tokens), runs each batch through
``nlp.pipe`` with a random batch size on pipelines with different batching settings around
the biLM in --bilm DIR (default: the tiny random-weight fixture model in the
checkout's tests/data/allennlp/tiny),
and checks that nothing raises, shapes, dtypes, finiteness and segments. It measures how far
each Doc's layers move when the Doc runs alone instead of in its batch: batches beyond
--atol are counted (and saved with --save-failures DIR), not stopped at, so the summary
gives the distribution. Prints a JSON summary (with --output FILE also written there, with the
results record of ``spacy_elmo.records.provenance``, the model's files' SHA-256 and which timestep loop ran); exits 1 on
any error or deviation > --atol.
"""
import argparse
import json
import sys
import time
import traceback
from pathlib import Path
from typing import Optional, Sequence

import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spacy_elmo.records.provenance import mark_start, model_record, portable_path, provenance

from lab import CHECKOUT
from lab.records.gather import model_files
from lab.records.inference import inference_path
from lab.reliability.fuzz import ATOL, PIPELINE_SETTINGS, batches, check_batch, fuzz_pipelines, load_or_exit

# the tiny random-weight model of the published format that the tests use, in the checkout
TINY_FIXTURE = CHECKOUT / "tests" / "data" / "allennlp" / "tiny"


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=10000, help="stop after at least this many Docs")
    parser.add_argument("--atol", type=float, default=ATOL, help="allowed deviation from the Doc run alone")
    parser.add_argument("--examples-per-round", type=int, default=200, help="hypothesis examples per round")
    parser.add_argument("--save-failures", type=Path, default=None, help="write failing batches here as JSON")
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--bilm", type=Path, default=TINY_FIXTURE, help="a biLM directory (default: %(default)s)")
    parser.add_argument("--output", type=Path, default=None, help="also write the JSON summary here")
    args = parser.parse_args(argv)
    mark_start()
    torch.set_num_threads(args.threads)
    pipelines = fuzz_pipelines(load_or_exit(args.bilm))
    totals = {"docs": 0, "tokens": 0, "batches": 0, "longest_doc": 0, "empty_docs": 0, "errors": 0,
              "batches_over_atol": 0, "max_deviation": 0.0}
    deviations = []
    failures = []

    @settings(
        max_examples=args.examples_per_round, deadline=None, database=None, suppress_health_check=list(HealthCheck)
    )
    @given(specs=batches, batch_size=st.integers(1, 9), name=st.sampled_from(sorted(PIPELINE_SETTINGS)))
    def one_batch(specs, batch_size, name):
        case = {"specs": specs, "batch_size": batch_size, "name": name}
        try:
            seen = check_batch(pipelines[name], specs, batch_size, atol=None)
        except Exception:  # noqa: BLE001 - a long run records every failure and goes on
            totals["errors"] += 1
            failures.append({**case, "error": traceback.format_exc()})
            return
        totals["docs"] += len(specs)
        totals["tokens"] += seen.tokens
        totals["batches"] += 1
        deviations.append(seen.deviation)
        totals["max_deviation"] = max(totals["max_deviation"], seen.deviation)
        if seen.deviation > args.atol:
            totals["batches_over_atol"] += 1
            failures.append({**case, "deviation": seen.deviation})
        lengths = [len(s[1]) if s[0] == "words" else -1 for s in specs]
        totals["longest_doc"] = max([totals["longest_doc"], *lengths])
        totals["empty_docs"] += sum(1 for n in lengths if n == 0)

    start = time.monotonic()
    while totals["docs"] < args.docs:
        one_batch()
        print(f"{totals['docs']} docs, {totals['tokens']} tokens, {time.monotonic() - start:.0f} s", file=sys.stderr)
    if args.save_failures and failures:
        args.save_failures.mkdir(parents=True, exist_ok=True)
        for i, failure in enumerate(failures):
            (args.save_failures / f"failure-{i}.json").write_text(json.dumps(failure), encoding="utf-8")
    ranked = sorted(deviations)
    quantiles = {f"p{q}": ranked[min(len(ranked) - 1, int(len(ranked) * q / 100))] for q in (50, 99)}
    ok = totals["errors"] == 0 and totals["batches_over_atol"] == 0
    record = {**provenance(model=model_record(args.bilm), data={}, data_note="Docs generated by hypothesis"),
              "inference": inference_path(), "model_files": model_files(args.bilm)}
    result = {"provenance": record, "bilm": portable_path(args.bilm), "atol": args.atol, "passed": ok, **totals,
              "deviation_quantiles": quantiles, "seconds": round(time.monotonic() - start, 1)}
    print(json.dumps(result))
    if args.output is not None:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
