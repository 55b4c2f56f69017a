"""How a Doc is cut into the token sequences that run through the biLM."""
from typing import List, Tuple

from spacy.tokens import Doc

from ..bilm.batching import windows


def doc_segments(doc: Doc, max_window: int) -> List[Tuple[int, int]]:
    """The [start, end) token ranges of a Doc that run through the biLM as separate sentences.

    With sentence boundaries (``doc.has_annotation("SENT_START")``) each sentence is a
    segment; without them the whole Doc is one. Segments longer than ``max_window`` tokens
    are cut into consecutive windows of ``max_window`` tokens (the last one shorter).
    Every segment gets its own <S> and </S>, so context does not cross a segment edge:
    the tokens at either side of a window edge see only their own window.

    doc (Doc): the document.
    max_window (int): most tokens per segment (>= 1).
    RETURNS (List[Tuple[int, int]]): ranges covering every token once, in order; [] for an empty Doc.
    """
    if max_window < 1:
        raise ValueError(f"max_window must be >= 1, not {max_window}")
    if len(doc) == 0:
        return []
    if doc.has_annotation("SENT_START"):
        spans = [(sent.start, sent.end) for sent in doc.sents]
    else:
        spans = [(0, len(doc))]
    return [window for start, end in spans for window in windows(start, end, max_window)]
