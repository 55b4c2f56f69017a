"""Long fuzz run of the `elmo` component: the checks of tests/reliability/test_component_fuzz.py
over many more generated Docs than CI affords.

    python scripts/fuzz_long.py --docs 10000

Generates batches of messy Docs with hypothesis (any non-surrogate code point, control
characters, combining marks, emoji ZWJ sequences, whitespace tokens, raw text through the
tokenizer, sentence starts, Docs up to thousands of tokens), runs each batch through
``nlp.pipe`` with a random batch size on tiny pipelines with different batching settings,
and checks shapes, finiteness, segments, and that every Doc equals the same Doc run alone
(1e-5). Prints a JSON summary; exits 1 with hypothesis's shrunk failing example on a failure.
"""
import argparse
import json
import sys
import time
from pathlib import Path

import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.reliability.fuzz_docs import PIPELINE_SETTINGS, batches, check_batch, tiny_pipelines  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=10000, help="stop after at least this many Docs")
    parser.add_argument("--examples-per-round", type=int, default=200, help="hypothesis examples per round")
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    pipelines = tiny_pipelines()
    totals = {"docs": 0, "tokens": 0, "batches": 0, "longest_doc": 0, "empty_docs": 0, "rounds": 0}
    by_pipeline = dict.fromkeys(PIPELINE_SETTINGS, 0)

    @settings(
        max_examples=args.examples_per_round, deadline=None, database=None, suppress_health_check=list(HealthCheck)
    )
    @given(specs=batches, batch_size=st.integers(1, 9), name=st.sampled_from(sorted(PIPELINE_SETTINGS)))
    def one_batch(specs, batch_size, name):
        n_tokens = check_batch(pipelines[name], specs, batch_size)
        totals["docs"] += len(specs)
        totals["tokens"] += n_tokens
        totals["batches"] += 1
        by_pipeline[name] += len(specs)
        lengths = [len(s[1]) if s[0] == "words" else -1 for s in specs]
        totals["longest_doc"] = max([totals["longest_doc"], *lengths])
        totals["empty_docs"] += sum(1 for n in lengths if n == 0)

    start = time.monotonic()
    while totals["docs"] < args.docs:
        one_batch()  # a new random round each call; raises with the shrunk example on failure
        totals["rounds"] += 1
        print(f"{totals['docs']} docs, {totals['tokens']} tokens, {time.monotonic() - start:.0f} s", file=sys.stderr)
    result = {**totals, "docs_by_pipeline": by_pipeline, "seconds": round(time.monotonic() - start, 1), "failures": 0}
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
