"""Generated Docs of messy Unicode and the checks every `elmo` output must pass.

Shared by the CI-sized property tests (tests/reliability/test_component_fuzz.py) and the long run
(``lab/reliability/fuzz_long.py``, >= 10,000 Docs). A Doc is described by a spec (``("words", words,
spaces, sent_starts)`` or ``("text", text)``) so that the same Doc can be rebuilt to run alone
and be compared with its batched run. Needs hypothesis (the ``test`` extra).
"""
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
from hypothesis import strategies as st
from spacy.language import Language
from spacy.tokens import Doc

from spacy_elmo.bilm import BiLM
from spacy_elmo.io import ModelFileError
from spacy_elmo.io.loading import locate_bilm
from spacy_elmo.pipeline import create_pipeline

# The tiny random-weight fixture model's recurrent weights amplify float32 rounding along long
# windows (see test_regression_long_window_batch_mates): 1e-4 for that model, 1e-5 for trained ones.
ATOL = 1e-4

# Pipelines whose batching differs: the library defaults, and settings that force many windows,
# many forward passes and a cap on padded positions.
PIPELINE_SETTINGS: Dict[str, dict] = {
    "defaults": {},
    "small_windows": {"model": {"max_window": 7, "batch_size": 3, "max_batch_items": 40}, "set_vector_hooks": True},
}

TROUBLEMAKERS = [
    " ", "\n", "\r\n", "\t", "\u3000", "\u00a0", "\x00", "a\x00b", "\x7f", "\x1b[31m", "\u0301", "e\u0301\u0301",
    "\u200d", "👩\u200d👩\u200d👧", "🏳\ufe0f\u200d🌈", "🇫🇷", "\ufeff", "\u202e",
    "\ufffe", "\uffff", "\U0010ffff",
    "<S>", "</S>", "x" * 1000, "é" * 500, "👍" * 30, "ﷺ", "\u0e01\u0e33",
]
# Every code point that UTF-8 (and so spaCy's StringStore) can hold: all but the surrogates.
CHARACTERS = st.characters(min_codepoint=0, max_codepoint=0x10FFFF, blacklist_categories=("Cs",))
tokens = st.one_of(st.text(alphabet=CHARACTERS, min_size=1, max_size=60), st.sampled_from(TROUBLEMAKERS))
Spec = Tuple


@st.composite
def doc_specs(draw, max_long: int = 3000) -> Spec:
    """A Doc: words with spaces and (sometimes) sentence starts, or raw text for the tokenizer.
    One Doc in ten is long (up to ``max_long`` tokens, built by repeating a drawn pattern)."""
    kind = draw(st.integers(0, 9))
    if kind == 0:
        return ("text", draw(st.text(alphabet=CHARACTERS, max_size=200)))
    if kind == 1 and max_long > 0:
        pattern = draw(st.lists(tokens, min_size=1, max_size=12))
        n = draw(st.integers(0, max_long))
        words = [pattern[i % len(pattern)] for i in range(n)]
    else:
        words = draw(st.lists(tokens, min_size=0, max_size=40))
    spaces = draw(st.lists(st.booleans(), min_size=len(words), max_size=len(words)))
    sent_starts = None
    if words and draw(st.booleans()):
        sent_starts = draw(st.lists(st.sampled_from([True, False, None]), min_size=len(words), max_size=len(words)))
    return ("words", words, spaces, sent_starts)


batches = st.lists(doc_specs(), min_size=1, max_size=8)


def build_doc(nlp: Language, spec: Spec) -> Doc:
    if spec[0] == "text":
        return nlp.make_doc(spec[1])
    _, words, spaces, sent_starts = spec
    return Doc(nlp.vocab, words=words, spaces=spaces, sent_starts=sent_starts)


def bilm_loader(path: Path) -> Callable[[], BiLM]:
    """A function loading the biLM at ``path`` as every entry point does (``io.loading.locate_bilm``:
    one of our directories, a published pair's directory, a pipeline, ...), located now so that a
    wrong path fails before the run starts."""
    return locate_bilm(Path(path)).load


def load_or_exit(path: Path) -> Callable[[], BiLM]:
    """``bilm_loader(path)`` for a command line: a path that holds no biLM ends the process with
    the reason (exit status 1), not a traceback."""
    try:
        return bilm_loader(path)
    except ModelFileError as error:
        raise SystemExit(f"error: {error}") from None


def fuzz_pipelines(load_bilm: Callable[[], BiLM]) -> Dict[str, Language]:
    """One `elmo` pipeline per entry of PIPELINE_SETTINGS, each with its own biLM from ``load_bilm()``."""
    return {name: create_pipeline(load_bilm(), config=settings) for name, settings in PIPELINE_SETTINGS.items()}


@dataclass
class BatchCheck:
    """What ``check_batch`` saw. deviation: the largest difference between a Doc's layers in the
    batch and the same Doc (or one of its segments) run alone."""

    tokens: int = 0
    deviation: float = 0.0


def check_batch(nlp: Language, specs: Sequence[Spec], batch_size: int, *, atol: Optional[float] = ATOL) -> BatchCheck:
    """Run the Docs through ``nlp.pipe`` together and check every output.

    Checks: right shape and dtype, numpy on CPU, finite; segments cover every token once, in
    order, never longer than max_window nor across a sentence start; each Doc equals the same
    Doc run alone (batch mates do not matter) and each segment equals ``BiLM.embed`` of its
    words alone (segments do not see each other), both to ``atol`` (None: measure only).
    """
    elmo = nlp.get_pipe("elmo")
    bilm = elmo.bilm
    n_layers, width = bilm.config.n_output_layers, bilm.config.output_dim
    max_window = elmo.model.attrs["max_window"]
    docs = list(nlp.pipe((build_doc(nlp, s) for s in specs), batch_size=batch_size))
    assert len(docs) == len(specs)
    seen = BatchCheck()
    for spec, doc in zip(specs, docs):
        seen.tokens += len(doc)
        out = doc._.elmo
        layers = out.layers
        assert type(layers) is np.ndarray and layers.dtype == np.float32, type(layers)
        assert layers.shape == (n_layers, len(doc), width), (layers.shape, len(doc))
        assert np.isfinite(layers).all()
        _check_segments(doc, out.segments, max_window)
        [alone] = nlp.pipe([build_doc(nlp, spec)])
        words = [t.text for t in doc]
        # BiLM.embed's own independence of batch mates is tested in tests/bilm/test_fuzz.py
        segments = bilm.embed([words[s:e] for s, e in out.segments], batch_size=64)
        pairs = [("depends on batch mates", layers, alone._.elmo.layers)] + [
            (f"segment {start}:{end}", layers[:, start:end], segment)
            for (start, end), segment in zip(out.segments, segments)
        ]
        for message, actual, expected in pairs:
            if actual.size:
                seen.deviation = max(seen.deviation, float(np.abs(actual - expected).max()))
            if atol is not None:
                np.testing.assert_allclose(actual, expected, atol=atol, err_msg=message)
        if len(doc):
            mixed = np.stack([doc[0]._.elmo, doc[-1]._.elmo, doc[:]._.elmo])
            assert mixed.shape == (3, width) and np.isfinite(mixed).all()
        if elmo.set_vector_hooks:
            assert doc.vector.shape == (width,) and np.isfinite(doc.vector).all()
    return seen


def _check_segments(doc: Doc, segments: Sequence[Tuple[int, int]], max_window: int) -> None:
    ends: List[int] = [0]
    for start, end in segments:
        assert start == ends[-1] and 0 < end - start <= max_window, segments
        ends.append(end)
    assert ends[-1] == len(doc), (segments, len(doc))
    if len(doc) and doc.has_annotation("SENT_START"):
        starts = {s for s, _ in segments}
        assert {sent.start for sent in doc.sents} <= starts, "a segment crosses a sentence start"

