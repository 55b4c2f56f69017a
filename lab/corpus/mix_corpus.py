"""Mix a replay of an earlier pretraining corpus into a wider one, for continuing a biLM on new text
without drifting away from the text it learned first.

Continuing a model on a corpus that is mostly new text (the wide corpus is four-fifths technical
manuals and dictionaries) moves it away from the general English it was trained on; replaying
part of the old data alongside the new is the usual remedy in continual pretraining. This script
takes every training sentence of CORPUS and adds TIMES more copies of those that also occur in
REPLAY's training text (only those: so a sentence that CORPUS removed, as a duplicate or as
evaluation text, stays out), shuffles the lot with a fixed seed and writes it in CORPUS's layout:

    python -m lab.corpus.mix_corpus --corpus corpus/wide --replay corpus/full --times 1 --output corpus/wide-replay

OUTPUT/pretrain/train/train-XX.txt (as many shards as CORPUS has), OUTPUT/pretrain/dev.txt (CORPUS's
held-out text, unchanged, so dev perplexity stays comparable with a run on CORPUS alone),
OUTPUT/mix-stats.json (sentences and tokens of each part, with provenance), OUTPUT/ATTRIBUTION.md
(CORPUS's, which names every source the mix holds) and OUTPUT/READY (the token total, written last).
"""
import argparse
import json
import random
import shutil
import sys
import time
from pathlib import Path
from typing import Dict, List

from spacy_elmo.records.provenance import data_record, mark_start, portable_args, provenance


def train_lines(corpus: Path) -> List[str]:
    """The training sentences of a corpus folder in prepare_corpus.py's layout, in file order."""
    folder = corpus / "pretrain" / "train"
    files = sorted(folder.glob("*.txt"))
    if not files:
        raise SystemExit(f"no training shards (*.txt) in {folder}: is {corpus} a corpus built by prepare_corpus.py or wide_corpus.py?")
    lines: List[str] = []
    for path in files:
        with path.open(encoding="utf8") as handle:
            lines.extend(line.rstrip("\n") for line in handle if line.strip())
    return lines


def mix(corpus_lines: List[str], replay_lines: List[str], *, times: int, seed: int) -> Dict[str, object]:
    """CORPUS's lines plus ``times`` extra copies of those also in REPLAY, shuffled with ``seed``."""
    if times < 0:
        raise ValueError(f"times must be 0 or more, not {times}")
    replay = set(replay_lines)
    shared = [line for line in corpus_lines if line in replay]
    mixed = corpus_lines + shared * times
    random.Random(seed).shuffle(mixed)
    return {"lines": mixed, "shared": shared}


def write_shards(lines: List[str], folder: Path, n_shards: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    size = -(-len(lines) // n_shards)
    for index in range(n_shards):
        with (folder / f"train-{index:02d}.txt").open("w", encoding="utf8") as handle:
            for line in lines[index * size : (index + 1) * size]:
                handle.write(line + "\n")


def n_tokens(lines: List[str]) -> int:
    return sum(len(line.split()) for line in lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, required=True, help="the wider corpus (its dev text is kept)")
    parser.add_argument("--replay", type=Path, required=True, help="the earlier corpus whose sentences are replayed")
    parser.add_argument("--times", type=int, default=1, help="extra copies of each replayed sentence")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", type=Path, required=True)
    args = parser.parse_args(argv)
    command = "python -m lab.corpus.mix_corpus " + " ".join(portable_args(sys.argv[1:] if argv is None else argv))
    mark_start(command)
    started = time.monotonic()
    if args.output.resolve() in (args.corpus.resolve(), args.replay.resolve()):
        raise SystemExit("--output must be a new folder, not one of the inputs")
    (args.output / "READY").unlink(missing_ok=True)
    corpus_lines = train_lines(args.corpus)
    result = mix(corpus_lines, train_lines(args.replay), times=args.times, seed=args.seed)
    lines, shared = result["lines"], result["shared"]
    train = args.output / "pretrain" / "train"
    if train.exists():
        shutil.rmtree(train)
    write_shards(lines, train, len(sorted((args.corpus / "pretrain" / "train").glob("*.txt"))))
    shutil.copyfile(args.corpus / "pretrain" / "dev.txt", args.output / "pretrain" / "dev.txt")
    attribution = args.corpus / "ATTRIBUTION.md"
    if attribution.is_file():  # the mix holds only CORPUS's sentences: its sources and licences are CORPUS's
        (args.output / "ATTRIBUTION.md").write_text(
            attribution.read_text(encoding="utf8").rstrip("\n") + f"\n\nMixed by `{command}`: the sentences above, "
            f"those also in the earlier corpus repeated {args.times} more time(s).\n", encoding="utf8")
    total = n_tokens(lines)
    stats = {
        "corpus": {"sentences": len(corpus_lines), "tokens": n_tokens(corpus_lines)},
        "replayed": {"sentences": len(shared), "tokens": n_tokens(shared), "extra_copies": args.times},
        "train": {"sentences": len(lines), "tokens": total},
        "replay_share_of_tokens": round(n_tokens(shared) * (1 + args.times) / total, 4) if total else 0.0,
        "seed": args.seed,
        "wall_time_s": round(time.monotonic() - started, 1),
    }
    stats["provenance"] = provenance(
        command, model=None, model_note="a corpus: no model was read",
        data=data_record([args.corpus / "pretrain", args.replay / "pretrain" / "train"]),
    )
    stats["corpus_sha256"] = data_record([args.output / "pretrain"])
    (args.output / "mix-stats.json").write_text(json.dumps(stats, indent=2) + "\n", encoding="utf8")
    (args.output / "READY").write_text(f"{total}\n", encoding="utf8")
    print(json.dumps({k: v for k, v in stats.items() if k not in ("provenance", "corpus_sha256")}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
