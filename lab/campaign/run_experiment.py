"""The small-data experiment of the campaigns: train each task on each training fraction with and without
ELMo, score on test: ``spacy_elmo.downstream.runs`` with the checkout's configs/ (the user's project runs
the same as ``python -m spacy_elmo downstream-train``).

    python -m lab.campaign.run_experiment --corpus corpus/full --elmo training/bilm-ewt/model-best \\
        --output training/full --tasks upos ner textcat --fractions 1 10 100 --training.max_steps 20000

Other ``--section.key value`` arguments override the configs of every run, as with ``spacy train``.
"""
import argparse
from pathlib import Path
from typing import Optional, Sequence

from spacy.cli._util import parse_config_overrides

from spacy_elmo.downstream.runs import SETTINGS, TASKS, run_cells

from lab import CHECKOUT

CONFIGS = CHECKOUT / "configs"


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, required=True, help="folder of <task>-{train-<pct>,dev,test}.spacy")
    parser.add_argument("--output", type=Path, required=True, help="folder for models/ and metrics/")
    parser.add_argument("--elmo", type=Path, help="the biLM directory the elmo setting uses")
    parser.add_argument("--tasks", nargs="+", default=list(TASKS), choices=list(TASKS))
    parser.add_argument("--fractions", nargs="+", type=int, default=[1, 10, 100], help="percent of train")
    parser.add_argument("--settings", nargs="+", default=list(SETTINGS), choices=list(SETTINGS))
    parser.add_argument(
        "--elmo-cache-mb",
        type=float,
        help="frozen biLM cache of the elmo runs in MB (the config's default otherwise); about 3 KB a "
        "training and dev token for the shipped model, so that later epochs and evaluations skip the biLM",
    )
    parser.add_argument(
        "--score-existing",
        action="store_true",
        help="do not train: score the model-best that earlier (e.g. interrupted) runs left in OUTPUT/models",
    )
    args, extra = parser.parse_known_args(argv)
    done = run_cells(
        args.corpus, args.output, configs=CONFIGS, elmo=args.elmo, tasks=args.tasks, fractions=args.fractions,
        settings=args.settings, overrides=parse_config_overrides(extra), elmo_cache_mb=args.elmo_cache_mb,
        score_only=args.score_existing,
    )
    print("\n".join(done))


if __name__ == "__main__":
    main()
