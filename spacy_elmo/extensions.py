"""doc._.elmo, token._.elmo, span._.elmo, and the hooks that make .vector and .similarity use ELMo."""
import warnings
from typing import Any, Iterable, Iterator, Optional, Union

import numpy as np
from spacy.tokens import Doc, Span, Token
from thinc.types import Floats1d


def install_extensions() -> None:
    """Register doc._.elmo, token._.elmo and span._.elmo (once)."""
    if not Doc.has_extension("elmo"):
        Doc.set_extension("elmo", default=None)
    if not Token.has_extension("elmo"):
        Token.set_extension("elmo", getter=_token_elmo)
    if not Span.has_extension("elmo"):
        Span.set_extension("elmo", getter=_span_elmo)


def install_vector_hooks(doc: Doc) -> None:
    """Make ``.vector``, ``.vector_norm``, ``.has_vector`` and ``.similarity`` of the Doc, its
    Spans and Tokens use the component's ELMo mix (the Doc must have ``doc._.elmo``)."""
    for hooks, vector in (
        (doc.user_hooks, _span_elmo),
        (doc.user_span_hooks, _span_elmo),
        (doc.user_token_hooks, _token_elmo),
    ):
        hooks["vector"] = vector
        hooks["vector_norm"] = _vector_norm
        hooks["has_vector"] = _has_vector
        hooks["similarity"] = _similarity


def restore_vector_hooks(docs: Iterable[Doc]) -> Iterator[Doc]:
    """Give back the vector hooks that serialization dropped, yielding each Doc.

    spaCy does not serialize a Doc's hooks, so Docs read from bytes (``Doc.from_bytes``,
    ``DocBin``, and every Doc of ``nlp.pipe(texts, n_process=2)``) keep ``doc._.elmo`` but their
    ``.vector`` falls back to static vectors. Wrap them: ``restore_vector_hooks(nlp.pipe(texts,
    n_process=2))``. Hooks go back where the component had set them (``set_vector_hooks``).
    """
    for doc in docs:
        output = doc._.elmo if Doc.has_extension("elmo") else None
        if output is not None and getattr(output, "vector_hooks", False):
            install_vector_hooks(doc)
        yield doc


def _token_elmo(token: Token) -> Optional[Floats1d]:
    output = token.doc._.elmo
    return None if output is None else output.mixed[token.i]


def _span_elmo(span: Union[Span, Doc]) -> Optional[Floats1d]:
    """Mean of the tokens' mixes (a Doc counts as the span of all its tokens); zeros if empty."""
    doc = span if isinstance(span, Doc) else span.doc
    output = doc._.elmo
    if output is None:
        return None
    start, end = (0, len(doc)) if isinstance(span, Doc) else (span.start, span.end)
    if end <= start:
        return np.zeros(output.width, dtype=np.float32)
    return output.mixed[start:end].mean(axis=0)


def _has_vector(obj: Union[Doc, Span, Token]) -> bool:
    return True


def _vector_norm(obj: Union[Doc, Span, Token]) -> float:
    return float(np.linalg.norm(obj.vector))


def _similarity(obj: Union[Doc, Span, Token], other: Any) -> float:
    """Cosine similarity of the ELMo vectors; 0.0 (with a warning) when one is all zeros."""
    a, b = obj.vector, other.vector
    if a.shape != b.shape:
        raise ValueError(
            f"Cannot compare an ELMo vector of width {a.shape} with a vector of width {b.shape}: "
            "compare objects from Docs processed by the same elmo component"
        )
    norms = float(np.linalg.norm(a)) * float(np.linalg.norm(b))
    if norms == 0.0:
        warnings.warn(f"similarity of {obj!r} and {other!r}: one of the vectors is all zeros, returning 0.0")
        return 0.0
    return float(np.dot(a, b) / norms)
