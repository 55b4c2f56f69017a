"""The hostile-file corpus in full: every published layout the package reads, damaged every way
``lab/reliability/hostile/`` knows, each loaded as a user loads it within 10 s and 1 GB above the
interpreter, and a few through the command line (``dump``).

    python -m lab.reliability.hostile_files --output results/reliability/hostile-files.json

Builds the corpus in a temporary folder (removed afterwards; --keep DIR keeps it there), loads every
case (``runner.run_cases``) and runs ``DUMP_CASES`` through ``python -m spacy_elmo dump``. Prints the
summary; with --output writes the record (``spacy_elmo.records.provenance``; every case with its
outcome, verdict, seconds and peak RSS; the slowest case and the largest RSS). Exits 1 when a case
fails (a verdict other than ``refused`` or, where the damage may leave a model, ``loaded``).
"""
import argparse
import json
import shutil
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Optional, Sequence

from spacy_elmo.records.provenance import mark_start, provenance

from lab.reliability.hostile.cases import select
from lab.reliability.hostile.layouts import BOMB_BYTES, DATA, build_corpus
from lab.reliability.hostile.runner import MEMORY_MB, SECONDS, dump_case, run_cases, summary

WARMUP = DATA / "allennlp" / "tiny"
# the cases the command line runs too: options that would allocate, a bomb, a link, cut weights
DUMP_CASES = (
    "allennlp-pair/options-lstm-dim-4e6",
    "nlpl-zip/bomb-model.hdf5",
    "deeppavlov-lm-tar/symlink-index-outside",
    "efml-folder/cut-half-encoder.pkl",
    "native/cut-half-model.safetensors",
    "tf-checkpoint/cut-half-model.ckpt-24.data-00000-of-00001",
)


def _progress(result: dict) -> None:
    print(f"{result['name']}: {result['outcome']} {result.get('error', '')} {result.get('seconds')} s", file=sys.stderr,
          flush=True)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", type=Path, default=None, help="write the record here (JSON)")
    parser.add_argument("--seed", type=int, default=0, help="the corpus's seed")
    parser.add_argument("--bomb-mib", type=int, default=BOMB_BYTES >> 20, help="what a bomb inflates to, MiB")
    parser.add_argument("--keep", type=Path, default=None, help="build the corpus in this new folder and keep it")
    args = parser.parse_args(argv)
    mark_start()
    root = args.keep or Path(tempfile.mkdtemp(prefix="hostile-files-"))
    start = time.monotonic()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # zipfile's "Duplicate name": the corpus means it
            cases = build_corpus(root / "corpus", seed=args.seed, bomb_bytes=args.bomb_mib << 20)
        built = time.monotonic() - start
        results = run_cases(cases, root / "corpus", warmup=WARMUP, log=_progress)
        results += [dump_case(case, root / "corpus") for case in select(cases, DUMP_CASES)]
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    found = summary(results)
    record = {
        "provenance": provenance(model=None, model_note="damaged copies of the test fixtures (tests/data/) and of a "
                                 "model saved by save_bilm, built by lab/reliability/hostile/ with the seed below",
                                 data={}, data_note="no data: the corpus is generated"),
        "seed": args.seed, "bomb_mib": args.bomb_mib, "budget": {"seconds": SECONDS, "memory_mb_above_baseline": MEMORY_MB},
        **found, "build_seconds": round(built, 1), "seconds": round(time.monotonic() - start, 1),
        "failures": [r for r in results if r["verdict"] not in ("refused", "loaded")],
        "results": results,
    }
    print(json.dumps({k: v for k, v in record.items() if k not in ("results", "provenance", "failures")}, indent=2))
    for failure in record["failures"]:
        print(f"{failure['verdict']}: {failure['name']}: {failure.get('error', '')} {failure.get('message', '')[:200]}",
              file=sys.stderr)
    if args.output is not None:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    return 0 if found["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
