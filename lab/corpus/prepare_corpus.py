"""Build the biLM corpora from open-licence raw text: one tokenized sentence per line.

Sources (project.yml assets under --datasets; docs/datasets.md): Project Gutenberg selections (public
domain) and Pang & Lee's movie reviews (CC BY 4.0) for pretraining; UD English
EWT raw sentences (CC BY-SA 4.0) as the fine-tuning domain; WikiText-2 test as
an extra held-out set (only with --wikitext, never in the bundled sample).

    python -m lab.corpus.prepare_corpus --datasets assets/datasets --output assets/corpus
    python -m lab.corpus.prepare_corpus --datasets assets/datasets --output corpus_sample --max-sentences 1500
    bible -l100000 Gen1:1-Rev22:21 > kjv.txt   # Debian's bible-kjv package
    python -m lab.corpus.prepare_corpus --datasets assets/datasets --output assets/corpus-full --wikitext --all-open --kjv kjv.txt

--all-open adds every other open-licence English text to pretraining: the King James Bible (public
domain, from --kjv), WikiText-2 validation (CC BY-SA 3.0; sentences with <unk> left out), the UD EWT
train text (CC BY-SA 4.0) and the WNUT17 training tweets (CC BY 4.0). Held out in every case: the
pretraining dev.txt, EWT dev and test text and WikiText-2 test.

Writes OUTPUT/pretrain/train/train-XX.txt, OUTPUT/pretrain/dev.txt, OUTPUT/domain/ewt-{train,dev}.txt,
OUTPUT/eval/ewt-test.txt, OUTPUT/eval/wikitext2-test.txt (with --wikitext) and OUTPUT/ATTRIBUTION.md.
"""
import argparse
import random
import re
import sys
import zipfile
from pathlib import Path
from typing import Dict, Iterator, List, Optional

import spacy

ATTRIBUTION = """# Attribution and licences of this corpus

Built by `{command}` (spacy-elmo): sentences split and tokenized with spaCy's rule-based
English tokenizer and sentencizer; {sampling}; nothing else changed.

- `pretrain/` (`train/` and the held-out `dev.txt`): Project Gutenberg selections as packaged by NLTK (2008): texts by Jane Austen,
  William Blake, G. K. Chesterton, Herman Melville, John Milton, William Shakespeare and
  Walt Whitman. Public domain (https://www.gutenberg.org). Mixed with:
  Movie Review Data, sentence polarity dataset v2.0, (c) 2004 Bo Pang and Lillian Lee,
  Creative Commons Attribution 4.0 International (CC BY 4.0),
  https://www.cs.cornell.edu/people/pabo/movie-review-data/ (NLTK packaging).
- `domain/` and `eval/ewt-test.txt`: Universal Dependencies English Web Treebank (UD_English-EWT), raw
  sentence text (the `# text` comments), train and dev splits (`domain/`) and the test split, held out for
  evaluation (`eval/`). Creative Commons Attribution-ShareAlike 4.0
  International (CC BY-SA 4.0), https://github.com/UniversalDependencies/UD_English-EWT;
  the English Web Treebank (LDC2012T13) text by Google Inc. / LDC, UD annotation by the UD
  contributors (Silveira et al. 2014). These files are under CC BY-SA 4.0 as well.
{all_open}{wikitext}"""

ALL_OPEN = """- Also in `pretrain/` (--all-open): the King James Version of the Bible (1611; public domain), verse text
  as printed by Debian's `bible-kjv` package, verse numbers removed; WikiText-2 (v1) validation set,
  Merity et al. 2016 (Salesforce), CC BY-SA 3.0, sentences containing `<unk>` left out and `@-@`,
  `@,@`, `@.@` joined back; the UD English EWT train text (CC BY-SA 4.0, as above; never its dev or
  test text); WNUT17 emerging-entities training tweets, Derczynski et al. 2017, CC BY 4.0 (tokens only).
"""

WIKITEXT = """- `eval/wikitext2-test.txt`: WikiText-2 (v1) test set, Merity et al. 2016 (Salesforce), as
  distributed in pytorch/examples; WikiText is distributed under CC BY-SA 3.0. Used for
  evaluation only.
"""


def gutenberg_paragraphs(folder: Path) -> Iterator[str]:
    """Paragraphs of the hard-wrapped etexts (blank-line separated), wrapped lines joined."""
    for path in sorted(folder.glob("*.txt")):
        text = path.read_text(encoding="latin-1")
        for block in re.split(r"\n\s*\n", text):
            paragraph = " ".join(block.split())
            if paragraph:
                yield paragraph


def movie_review_sentences(zip_path: Path) -> Iterator[List[str]]:
    """Already lower-cased, tokenized, one sentence per line."""
    with zipfile.ZipFile(zip_path) as archive:
        for name in sorted(n for n in archive.namelist() if n.endswith(".txt")):
            for line in archive.read(name).decode("utf-8", errors="replace").splitlines():
                tokens = line.split()
                if tokens:
                    yield tokens


def ewt_texts(conllu: Path) -> List[str]:
    """The raw text of each sentence of a UD file (its ``# text = `` line), in file order."""
    prefix = "# text = "
    return [line[len(prefix):] for line in conllu.read_text(encoding="utf-8").splitlines() if line.startswith(prefix)]


def kjv_verses(path: Path) -> Iterator[str]:
    """Verse lines of `bible -l100000 Gen1:1-Rev22:21` ("  12 And God said ..."), numbers removed."""
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        match = re.match(r"\s+\d+ (.+)", line)
        if match:
            yield match.group(1)


def wikitext_sentences(path: Path) -> Iterator[List[str]]:
    """WikiText lines without headings; sentences holding `<unk>` are left out."""
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line or line.startswith("="):
            continue
        line = line.replace(" @-@ ", "-").replace(" @,@ ", ",").replace(" @.@ ", ".")
        for sentence in re.split(r"(?<= \.) ", line):
            tokens = sentence.split()
            if tokens and "<unk>" not in tokens:
                yield tokens


def conll_tokens(path: Path) -> Iterator[List[str]]:
    """The sentences of a token<TAB>tag file (blank-line separated)."""
    tokens: List[str] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            tokens.append(line.split("\t")[0])
        elif tokens:
            yield tokens
            tokens = []
    if tokens:
        yield tokens


def spacy_sentences(nlp, texts: Iterator[str], *, split: bool) -> Iterator[List[str]]:
    for doc in nlp.pipe(texts, batch_size=256):
        spans = doc.sents if split else [doc[:]]
        for span in spans:
            tokens = [t.text for t in span if not t.is_space]
            if tokens:
                yield tokens


def write_lines(path: Path, sentences: List[List[str]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(" ".join(s) + "\n" for s in sentences), encoding="utf-8")


def main() -> None:
    args = parse_args()
    limit = args.max_sentences or None
    rng = random.Random(args.seed)
    nlp = spacy.blank("en")
    nlp.add_pipe("sentencizer")
    sources = pretraining_sources(nlp, args, rng, limit)
    pretrain = [sentence for sentences in sources.values() for sentence in sentences]
    rng.shuffle(pretrain)
    n_dev = max(1, int(len(pretrain) * args.dev_fraction)) if not limit else max(1, len(pretrain) // 20)
    write_lines(args.output / "pretrain" / "dev.txt", pretrain[:n_dev])
    train = pretrain[n_dev:]
    shards = max(1, min(args.shards, len(train)))
    for k in range(shards):
        write_lines(args.output / "pretrain" / "train" / f"train-{k:02d}.txt", train[k::shards])
    write_ewt(nlp, args.datasets / "ud_english_ewt", args.output, limit)
    wikitext = ""
    if args.wikitext:
        lines = (args.datasets / "lm_wikitext2" / "test.txt").read_text(encoding="utf-8").splitlines()
        write_lines(args.output / "eval" / "wikitext2-test.txt", [l.split() for l in lines if l.split()])
        wikitext = WIKITEXT
    sampling = f"a seeded random sample of {limit} sentences per source" if limit else "all sentences"
    command = "python -m lab.corpus.prepare_corpus " + " ".join(sys.argv[1:])
    text = ATTRIBUTION.format(wikitext=wikitext, all_open=ALL_OPEN if args.all_open else "", sampling=sampling, command=command)
    (args.output / "ATTRIBUTION.md").write_text(text, encoding="utf-8")
    print(
        f"{args.output}: pretrain {len(train)} train / {n_dev} dev sentences ("
        + ", ".join(f"{len(v)} {k}" for k, v in sources.items())
        + f"), {sum(map(len, pretrain))} tokens; EWT train/dev, shards {shards}"
    )


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", type=Path, required=True, help="the datasets folder (project.yml's vars.datasets)")
    parser.add_argument("--output", type=Path, required=True)
    parser.add_argument("--max-sentences", type=int, default=0, help="per source (0: all); for a small sample")
    parser.add_argument("--shards", type=int, default=8, help="pretraining files")
    parser.add_argument("--dev-fraction", type=float, default=0.01)
    parser.add_argument("--wikitext", action="store_true", help="also copy WikiText-2 test (evaluation only)")
    parser.add_argument("--all-open", action="store_true", help="every other open-licence text in pretraining (see above)")
    parser.add_argument("--kjv", type=Path, default=None, help="with --all-open: the King James Bible verse dump")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.all_open and (args.kjv is None or not args.kjv.is_file()):
        parser.error("--all-open needs --kjv FILE (bible -l100000 Gen1:1-Rev22:21 > FILE)")
    return args


def pretraining_sources(nlp, args: argparse.Namespace, rng: random.Random, limit: Optional[int]) -> Dict[str, List[List[str]]]:
    """The pretraining sentences by source, in the order they are pooled (sampled with ``limit``)."""
    gutenberg = list(spacy_sentences(nlp, gutenberg_paragraphs(args.datasets / "lm_gutenberg_nltk2008"), split=True))
    reviews = list(movie_review_sentences(args.datasets / "domain_movie_reviews" / "movie_reviews.zip"))
    if limit:
        # a spread-out sample, not the first book only
        gutenberg = rng.sample(gutenberg, min(limit, len(gutenberg)))
        reviews = rng.sample(reviews, min(limit, len(reviews)))
    sources = {"Gutenberg": gutenberg, "movie reviews": reviews}
    if args.all_open:
        sources["King James Bible"] = list(spacy_sentences(nlp, kjv_verses(args.kjv), split=True))
        sources["WikiText-2 valid"] = list(wikitext_sentences(args.datasets / "lm_wikitext2" / "valid.txt"))
        raw = ewt_texts(args.datasets / "ud_english_ewt" / "en_ewt-ud-train.conllu")
        sources["EWT train"] = list(spacy_sentences(nlp, iter(raw), split=False))
        sources["WNUT17 train"] = list(conll_tokens(args.datasets / "wnut17" / "wnut17train.conll"))
    return sources


def write_ewt(nlp, ewt: Path, output: Path, limit: Optional[int]) -> None:
    """The EWT raw text: train and dev as the fine-tuning domain, test held out for evaluation."""
    for split in ("train", "dev"):
        lines = ewt_texts(ewt / f"en_ewt-ud-{split}.conllu")
        if limit:
            lines = lines[: limit if split == "train" else max(limit // 4, 1)]
        write_lines(output / "domain" / f"ewt-{split}.txt", list(spacy_sentences(nlp, iter(lines), split=False)))
    test_lines = ewt_texts(ewt / "en_ewt-ud-test.conllu")
    if limit:
        test_lines = test_lines[: max(limit // 4, 1)]
    write_lines(output / "eval" / "ewt-test.txt", list(spacy_sentences(nlp, iter(test_lines), split=False)))


if __name__ == "__main__":
    main()
