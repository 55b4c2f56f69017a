"""Labelled corpora -> spaCy's binary .spacy format, optionally a seeded fraction of the sentences.

Three input formats: ``ud`` (CoNLL-U) and ``ner`` (CoNLL columns), read by the package's
``spacy_elmo.downstream.corpus`` (which the user's project runs as ``python -m spacy_elmo
downstream-corpus``), and ``textcat``: Pang & Lee's movie-review polarity corpus (v2.0, NLTK's ``movie_reviews.zip`` or a
folder holding its ``pos/`` and ``neg/`` folders of ``.txt`` files): one Doc per review, its lines
(one tokenized sentence each) as sentences, ``doc.cats`` {"pos": 1.0, "neg": 0.0} or the reverse.
The reviews are split by a seeded shuffle per label into train / dev / test (80% / 10% / 10%, the
same share of each label in every part); ``--part`` picks one. A fraction keeps that share of the
part's reviews of each label, nested as below.

Sentences are grouped into Docs of ``--n-sents``; fractions are seeded and nested (1% inside 10% inside
100%), as ``spacy_elmo.downstream.corpus`` says.

    python -m lab.corpus.convert_corpus ud en_ewt-ud-train.conllu corpus/upos-train-{pct}.spacy --fraction 0.01 0.1 1
    python -m lab.corpus.convert_corpus textcat movie_reviews.zip corpus/textcat-train-{pct}.spacy --part train \\
        --fraction 0.01 0.1 1
"""
import argparse
import random
import zipfile
from pathlib import Path, PurePosixPath
from typing import List, Optional, Sequence, Tuple

from spacy.tokens import Doc, DocBin
from spacy.vocab import Vocab

from spacy_elmo.downstream.corpus import READERS, read_conllu, select_fraction, write

__all__ = ["READERS", "convert", "read_conllu", "read_polarity_reviews", "select_fraction", "split_reviews", "write"]
# (label, tokenized sentences): one review
Review = Tuple[str, List[List[str]]]
POLARITY_LABELS = ("pos", "neg")
PARTS = {"train": 0.8, "dev": 0.1, "test": 0.1}


def read_polarity_reviews(path: Path) -> List[Review]:
    """The reviews of the polarity corpus (a zip or a folder with pos/ and neg/), in file-name order."""
    path = Path(path)
    if path.is_dir():
        files = {f.relative_to(path).as_posix(): f.read_bytes() for f in path.rglob("*.txt")}
    else:
        with zipfile.ZipFile(path) as archive:
            files = {name: archive.read(name) for name in archive.namelist() if name.endswith(".txt")}
    reviews = []
    for name in sorted(files):
        folder = PurePosixPath(name).parent.name
        if folder in POLARITY_LABELS:
            lines = files[name].decode("utf-8").splitlines()
            reviews.append((folder, [line.split() for line in lines if line.split()]))
    if not reviews:
        raise ValueError(f"no reviews (pos/*.txt, neg/*.txt) in {path}")
    return reviews


def split_reviews(reviews: Sequence[Review], part: str, seed: int) -> List[Review]:
    """One part (train, dev or test: PARTS) of a seeded split made per label, in corpus order."""
    if part not in PARTS:
        raise ValueError(f"unknown part {part!r}; use one of {list(PARTS)}")
    chosen = []
    for label, indices in _indices_by_label(reviews):
        random.Random(f"{seed}-{label}").shuffle(indices)
        bounds = [round(sum(list(PARTS.values())[:k]) * len(indices)) for k in range(len(PARTS) + 1)]
        k = list(PARTS).index(part)
        chosen += indices[bounds[k] : bounds[k + 1]]
    return [reviews[i] for i in sorted(chosen)]


def _indices_by_label(reviews: Sequence[Review]) -> List[Tuple[str, List[int]]]:
    return [(label, [i for i, review in enumerate(reviews) if review[0] == label]) for label in POLARITY_LABELS]


def reviews_to_docs(vocab: Vocab, reviews: Sequence[Review]) -> List[Doc]:
    """One Doc per review: its sentences with sentence starts, doc.cats 1.0 for its label, 0.0 otherwise."""
    docs = []
    for label, sentences in reviews:
        words = [w for sentence in sentences for w in sentence]
        sent_starts = [i == 0 for sentence in sentences for i in range(len(sentence))]
        doc = Doc(vocab, words=words, spaces=[True] * len(words), sent_starts=sent_starts)
        doc.cats = {name: float(name == label) for name in POLARITY_LABELS}
        docs.append(doc)
    return docs


def write_reviews(reviews: Sequence[Review], output_path: Path, *, fraction: float, seed: int) -> Tuple[int, int, int]:
    """Write a seeded ``fraction`` of each label's reviews. RETURNS (Tuple[int, int, int]): docs, sentences, tokens."""
    chosen = []
    for _, indices in _indices_by_label(reviews):
        chosen += [indices[k] for k in select_fraction(len(indices), fraction, seed)]
    kept = [reviews[i] for i in sorted(chosen)]
    output_path = Path(output_path)
    output_path.parent.mkdir(parents=True, exist_ok=True)
    DocBin(docs=reviews_to_docs(Vocab(), kept), store_user_data=False).to_disk(output_path)
    return len(kept), sum(len(s) for _, s in kept), sum(len(words) for _, s in kept for words in s)


def convert(
    kind: str,
    input_path: Path,
    output_path: Path,
    *,
    fraction: float = 1.0,
    seed: int = 0,
    n_sents: int = 10,
    part: Optional[str] = None,
) -> Tuple[int, int, int]:
    """Convert one file (textcat: one ``part`` of the corpus, one Doc per review; ``n_sents`` unused).

    RETURNS (Tuple[int, int, int]): docs, sentences and tokens written.
    """
    if kind == "textcat":
        if part is None:
            raise ValueError(f"the textcat corpus is split: give part, one of {list(PARTS)}")
        reviews = split_reviews(read_polarity_reviews(input_path), part, seed)
        return write_reviews(reviews, output_path, fraction=fraction, seed=seed)
    if kind not in READERS:
        raise ValueError(f"unknown corpus kind {kind!r}; use one of {sorted(READERS) + ['textcat']}")
    if part is not None:
        raise ValueError(f"part is for the textcat corpus only, not {kind!r}")
    sentences = list(READERS[kind](Path(input_path).read_text(encoding="utf-8")))
    return write(sentences, kind, output_path, fraction=fraction, seed=seed, n_sents=n_sents)


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("kind", choices=[*READERS, "textcat"], help="input format")
    parser.add_argument(
        "input", type=Path, help=".conllu (ud), CoNLL NER columns (ner), movie_reviews.zip or its folder (textcat)"
    )
    parser.add_argument("output", help="output .spacy file; {pct} stands for the fraction in percent")
    parser.add_argument(
        "--fraction", type=float, nargs="+", default=[1.0], help="shares of sentences (textcat: reviews), in (0, 1]"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the shuffles that split and pick the fraction")
    parser.add_argument("--n-sents", type=int, default=10, help="sentences per Doc (ud, ner)")
    parser.add_argument("--part", choices=list(PARTS), help="textcat: which part of the seeded split to write")
    args = parser.parse_args(argv)
    if len(args.fraction) > 1 and "{pct}" not in args.output:
        parser.error("several fractions need {pct} in the output path")
    if (args.kind == "textcat") != (args.part is not None):
        parser.error("--part is needed for textcat and only there")
    if args.kind == "textcat":
        reviews = split_reviews(read_polarity_reviews(args.input), args.part, args.seed)
    else:
        sentences = list(READERS[args.kind](args.input.read_text(encoding="utf-8")))
    for fraction in args.fraction:
        output = Path(args.output.format(pct=f"{100 * fraction:g}"))
        if args.kind == "textcat":
            counts = write_reviews(reviews, output, fraction=fraction, seed=args.seed)
        else:
            counts = write(sentences, args.kind, output, fraction=fraction, seed=args.seed, n_sents=args.n_sents)
        print(f"{output}: {counts[0]} docs, {counts[1]} sentences, {counts[2]} tokens")


if __name__ == "__main__":
    main()
