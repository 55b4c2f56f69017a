"""Does a vocabulary rebuilt from a new pretraining corpus pay? The OOV rate of held-out texts under
the shipped biLM's vocabulary and under vocabularies of the corpus's most frequent words.

The softmax vocabulary only decides which words the language model is trained to predict; the
shipped model's softmax is trained for its own. A rebuilt vocabulary needs a new softmax, warmed up
from scratch, so it pays only if it covers the text the model is judged on clearly better.

    python -m lab.corpus.vocab_oov --corpus CORPUS --held-out EWT_TEST WIKITEXT2_TEST ... \\
        --output results/campaign-wide/vocab-oov.json
"""
import argparse
import collections
import json
from pathlib import Path
from typing import Counter, Iterable, List, Set

from spacy_elmo.records.provenance import data_record, mark_start, model_record, portable_path, provenance

from lab import CHECKOUT

SHIPPED = CHECKOUT / "spacy_elmo" / "models" / "en_small"


def count_tokens(files: Iterable[Path]) -> Counter:
    """files (Iterable[Path]): one sentence a line, tokens separated by spaces.
    RETURNS (Counter): how often each token occurs."""
    counts: Counter = collections.Counter()
    for path in files:
        with open(path, encoding="utf-8") as lines:
            for line in lines:
                counts.update(line.split())
    return counts


def oov_rate(vocab: Set[str], path: Path) -> float:
    """RETURNS (float): the percentage of the tokens of PATH that VOCAB lacks."""
    total = missing = 0
    with open(path, encoding="utf-8") as lines:
        for line in lines:
            for token in line.split():
                total += 1
                missing += token not in vocab
    return 100.0 * missing / max(total, 1)


def rebuilt(counts: Counter, size: int, min_count: int) -> Set[str]:
    """RETURNS (Set[str]): the SIZE most frequent words seen at least MIN_COUNT times, as
    ``spacy_elmo.training.vocab`` keeps them."""
    return {word for word, count in counts.most_common(size) if count >= min_count}


def main(argv: List[str] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, required=True, help="a corpus folder with pretrain/train/ (lab/corpus/wide_corpus.py)")
    parser.add_argument("--held-out", type=Path, nargs="+", required=True, help="texts the model is judged on")
    parser.add_argument("--sizes", type=int, nargs="+", default=[39951, 50000], help="rebuilt vocabulary sizes")
    parser.add_argument("--min-count", type=int, default=3)
    parser.add_argument("--output", type=Path, required=True)
    args = parser.parse_args(argv)
    mark_start()
    shards = sorted(p for p in (args.corpus / "pretrain" / "train").iterdir() if p.is_file())
    if not shards:
        raise SystemExit(f"no pretraining shards in {args.corpus / 'pretrain' / 'train'}: build the corpus first")
    counts = count_tokens(shards)
    shipped = {w for w in (SHIPPED / "vocab.txt").read_text(encoding="utf-8").split("\n") if w}
    texts = [*args.held_out, args.corpus / "pretrain" / "dev.txt"]
    names = [portable_path(p) for p in texts]
    rows = [{"vocabulary": "shipped", "words": len(shipped), "shared_with_shipped": len(shipped),
             "oov_pct": {n: round(oov_rate(shipped, p), 2) for n, p in zip(names, texts)}}]
    for size in args.sizes:
        vocab = rebuilt(counts, size, args.min_count)
        rows.append({"vocabulary": f"rebuilt: top {size}, min count {args.min_count}", "words": len(vocab),
                     "shared_with_shipped": len(vocab & shipped),
                     "oov_pct": {n: round(oov_rate(vocab, p), 2) for n, p in zip(names, texts)}})
    record = {"corpus_tokens": sum(counts.values()), "rows": rows,
              "provenance": provenance(model=model_record(SHIPPED), data=data_record([*shards, *texts]))}
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    for row in rows:
        print(row["vocabulary"], row["words"], row["oov_pct"])


if __name__ == "__main__":
    main()
