"""Labelled corpora -> spaCy's binary .spacy format, optionally a seeded fraction of the sentences.

- ``ud``: Universal Dependencies CoNLL-U. The syntactic words (rows with an integer ID; multiword-token
  ranges and empty nodes skipped) become the tokens, UPOS goes to ``token.tag_`` (what spaCy's tagger
  predicts) and ``token.pos_``, ``SpaceAfter=No`` to the whitespace.
- ``ner``: CoNLL-2003 style columns (token first, IOB1 or IOB2 tag last; ``-DOCSTART-`` lines skipped),
  also WNUT-17's tab-separated ``token<TAB>tag``.

Sentences are grouped into Docs of ``n_sents`` with sentence starts set. A fraction (given in percent to
``convert_fractions``) keeps the first ``round(fraction * n)`` sentences of one seeded shuffle (at
least one), so the 1% set is inside the 10% set, which is inside 100%; kept sentences stay in corpus
order.
"""
import random
from pathlib import Path
from typing import Iterator, List, Sequence, Tuple, Union

from spacy.tokens import Doc, DocBin
from spacy.training import biluo_tags_to_spans, iob_to_biluo
from spacy.vocab import Vocab

from .lists import comma_list

# (words, spaces, tags): one sentence
Sentence = Tuple[List[str], List[bool], List[str]]


def read_conllu(text: str) -> Iterator[Sentence]:
    """Sentences of a CoNLL-U file; tags are UPOS."""
    words: List[str] = []
    spaces: List[bool] = []
    tags: List[str] = []
    for line in text.splitlines():
        if not line.strip():
            if words:
                yield words, spaces, tags
            words, spaces, tags = [], [], []
        elif not line.startswith("#"):
            cols = line.split("\t")
            if len(cols) != 10:
                raise ValueError(f"CoNLL-U line has {len(cols)} columns, expected 10: {line!r}")
            if not cols[0].isdigit():  # "3-4" multiword range or "5.1" empty node
                continue
            words.append(cols[1])
            tags.append(cols[3])
            spaces.append("SpaceAfter=No" not in cols[9].split("|"))
    if words:
        yield words, spaces, tags


def read_conll_ner(text: str) -> Iterator[Sentence]:
    """Sentences of a CoNLL NER file; tags are the last column's IOB tags (IOB1 or IOB2)."""
    words: List[str] = []
    tags: List[str] = []
    for line in text.splitlines():
        # Tab-separated files can hold tokens with spaces; the others are space-separated.
        cols = line.split("\t") if "\t" in line else line.split(" ")
        if not line.strip() or cols[0] == "-DOCSTART-":
            if words:
                yield words, [True] * len(words), tags
            words, tags = [], []
            continue
        if len(cols) < 2:
            raise ValueError(f"NER line needs a token and a tag: {line!r}")
        words.append(cols[0])
        tags.append(cols[-1])
    if words:
        yield words, [True] * len(words), tags


def select_fraction(n_items: int, fraction: float, seed: int) -> List[int]:
    """Indices of a seeded ``fraction`` of ``n_items``, nested across fractions, in ascending order."""
    if not 0.0 < fraction <= 1.0:
        raise ValueError(f"fraction must be in (0, 1], got {fraction}")
    order = list(range(n_items))
    random.Random(seed).shuffle(order)
    keep = max(1, round(fraction * n_items)) if n_items else 0
    return sorted(order[:keep])


def sentences_to_docs(vocab: Vocab, sentences: Sequence[Sentence], kind: str, n_sents: int) -> List[Doc]:
    """Group sentences into Docs of ``n_sents``, with sentence starts and the gold tags or entities."""
    docs = []
    for start in range(0, len(sentences), n_sents):
        group = sentences[start : start + n_sents]
        words = [w for s in group for w in s[0]]
        spaces = [sp for s in group for sp in s[1]]
        # The last token of a sentence is followed by a space, so Doc.text separates sentences.
        spaces = _space_after_sentences(group, spaces)
        sent_starts = [i == 0 for s in group for i in range(len(s[0]))]
        if kind == "ud":
            tags = [t for s in group for t in s[2]]
            doc = Doc(vocab, words=words, spaces=spaces, tags=tags, pos=tags, sent_starts=sent_starts)
        else:
            # BILUO per sentence: an entity never crosses a sentence boundary.
            biluo = [t for s in group for t in iob_to_biluo(s[2])]
            doc = Doc(vocab, words=words, spaces=spaces, sent_starts=sent_starts)
            doc.ents = biluo_tags_to_spans(doc, biluo)
        docs.append(doc)
    return docs


def _space_after_sentences(group: Sequence[Sentence], spaces: List[bool]) -> List[bool]:
    end = 0
    for words, _, _ in group:
        end += len(words)
        spaces[end - 1] = True
    return spaces


def write(
    sentences: Sequence[Sentence], kind: str, output_path: Path, *, fraction: float, seed: int, n_sents: int
) -> Tuple[int, int, int]:
    """Write a seeded ``fraction`` of the sentences. RETURNS (Tuple[int, int, int]): docs, sentences, tokens."""
    chosen = [sentences[i] for i in select_fraction(len(sentences), fraction, seed)]
    docs = sentences_to_docs(Vocab(), chosen, kind, n_sents)
    output_path = Path(output_path)
    output_path.parent.mkdir(parents=True, exist_ok=True)
    DocBin(docs=docs, store_user_data=False).to_disk(output_path)
    return len(docs), len(chosen), sum(len(s[0]) for s in chosen)


READERS = {"ud": read_conllu, "ner": read_conll_ner}


def convert_fractions(
    kind: str, input_path: Path, output: str, fractions: Union[str, Sequence[float]] = (100,), *, seed: int = 0,
    n_sents: int = 10,
) -> List[Tuple[Path, Tuple[int, int, int]]]:
    """Write each seeded fraction of one file's sentences to ``output`` ("{pct}" in it stands for the
    fraction in percent, needed with several fractions). fractions: percent of the sentences, in
    (0, 100], or a comma-separated string of them ("1,10,100").

    RETURNS (List[Tuple[Path, Tuple[int, int, int]]]): each file written, with its docs, sentences and tokens.
    """
    if kind not in READERS:
        raise ValueError(f"unknown corpus kind {kind!r}; use one of {sorted(READERS)}")
    percents = comma_list(fractions, float)
    outside = [f"{pct:g}" for pct in percents if not 0 < pct <= 100]
    if outside or not percents:
        raise ValueError(f"fractions are percent of the sentences, in (0, 100]: not {', '.join(outside) or repr(fractions)}")
    if len(percents) > 1 and "{pct}" not in output:
        raise ValueError(f"several fractions need {{pct}} in the output path, not {output!r}")
    sentences = list(READERS[kind](Path(input_path).read_text(encoding="utf-8")))
    written = []
    for pct in percents:
        path = Path(output.format(pct=f"{pct:g}"))
        written.append((path, write(sentences, kind, path, fraction=pct / 100, seed=seed, n_sents=n_sents)))
    return written
