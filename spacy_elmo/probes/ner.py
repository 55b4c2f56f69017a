"""Named entities in CoNLL-style column files: reading, IOB1 -> BIO, entity F1.

CoNLL-2003 (``eng.train``: token POS chunk tag, IOB1), CoNLL++ (IOB2) and WNUT-17
(token<TAB>tag, IOB2) all keep the token in the first column and the entity tag in the last;
``-DOCSTART-`` lines separate documents. Tags are rewritten to BIO on reading: IOB1 marks an
entity's first token ``B-`` only after an entity of the same type, and an ``I-X`` that does not
continue an ``X`` starts one. The same rewrite makes a classifier's tags well formed before
scoring, which is how conlleval reads them.
"""
from typing import List, Sequence, Set, Tuple

from .conllu import PathLike, Tagged, require_file


def to_bio(tags: Sequence[str]) -> Tuple[str, ...]:
    """IOB1 (or ill-formed BIO) tags as BIO: every entity starts with ``B-``. Valid BIO is unchanged."""
    out = []
    previous = "O"
    for tag in tags:
        if tag.startswith("I-") and previous[2:] != tag[2:]:
            tag = "B-" + tag[2:]
        out.append(tag)
        previous = tag
    return tuple(out)


def entity_spans(tags: Sequence[str]) -> Set[Tuple[int, int, str]]:
    """RETURNS (Set[Tuple[int, int, str]]): (start, end, type) of each entity in BIO tags."""
    spans = set()
    start, kind = None, ""
    for i, tag in enumerate(list(tags) + ["O"]):
        if start is not None and not (tag.startswith("I-") and tag[2:] == kind):
            spans.add((start, i, kind))
            start = None
        if tag.startswith("B-"):
            start, kind = i, tag[2:]
    return spans


def entity_f1(gold: Sequence[Sequence[str]], predicted: Sequence[Sequence[str]]) -> float:
    """Micro-averaged entity F1 (exact span and type), in percent; predictions are made BIO first."""
    found = correct = expected = 0
    for gold_tags, predicted_tags in zip(gold, predicted):
        gold_spans = entity_spans(to_bio(gold_tags))
        predicted_spans = entity_spans(to_bio(predicted_tags))
        found += len(predicted_spans)
        expected += len(gold_spans)
        correct += len(gold_spans & predicted_spans)
    if not found or not expected or not correct:
        return 0.0
    precision, recall = correct / found, correct / expected
    return 100.0 * 2 * precision * recall / (precision + recall)


def read_ner_columns(path: PathLike) -> List[Tagged]:
    """Tokens and BIO entity tags of a CoNLL-style column file (first column token, last column tag).

    RETURNS (List[Tagged]): (tokens, BIO tags) per sentence, in file order.
    """
    path = require_file(path, "NER column file")
    sentences: List[Tagged] = []
    words: List[str] = []
    tags: List[str] = []

    def close() -> None:
        if words:
            sentences.append((tuple(words), to_bio(tags)))
            words.clear()
            tags.clear()

    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            columns = line.split()
            if not columns:
                close()
                continue
            if columns[0] == "-DOCSTART-":
                close()
                continue
            tag = columns[-1]
            if len(columns) < 2 or not (tag == "O" or tag[:2] in ("B-", "I-")):
                raise ValueError(
                    f"{path}:{number}: expected 'token ... tag' with an IOB1/BIO tag (O, B-TYPE, I-TYPE), got {line.strip()!r}"
                )
            words.append(columns[0])
            tags.append(tag)
    close()
    if not sentences:
        raise ValueError(f"{path} holds no tagged sentences")
    return sentences
