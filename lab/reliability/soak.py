"""Soak: stream many short Docs through ``nlp.pipe`` and watch the process's memory.

Shared by the CI-sized soak test (tests/reliability/test_soak.py, 3,000 Docs) and
``lab/reliability/soak_long.py``. RSS is sampled with psutil (the ``test`` extra) every ``sample_every`` Docs
and once more at the end, after a garbage collection; that final reading is the last sample and
counts like every other. Growth is measured from the end of the warm-up (allocator pools, spaCy's
StringStore filling with the corpus's words, torch's first-call set-up): to the last sample
(``growth_pct``) and to the largest (``peak_growth_pct``), and the curve between is described by
how many intervals between samples rose, stayed and fell, so that "flat" can be checked against
the numbers rather than read off a chart. Every Doc is checked
for torch objects: ``doc._.elmo.layers`` must be a float32 numpy array that owns its memory, so
no torch storage (or whole batch buffer) stays alive through a Doc.
"""
import gc
import random
import time
import warnings
from dataclasses import asdict, dataclass, field
from typing import Any, Iterator, List, Sequence

import numpy as np
import psutil
import torch
from spacy.language import Language

ALPHABET = "abcdefghijklmnopqrstuvwxyzéüßçñøåæœ" + "абвгдежз" + "日本語中文한국어" + "0123456789"


def short_texts(n: int, *, vocab_size: int = 20000, seed: int = 0) -> Iterator[str]:
    """``n`` texts of 1 to 25 tokens drawn (Zipf-like) from a fixed vocabulary of made-up words,
    with punctuation and emoji; the vocabulary is closed so that spaCy's StringStore (which
    keeps every string it has seen, by design) stops growing during the warm-up."""
    rng = random.Random(seed)
    words = ["".join(rng.choice(ALPHABET) for _ in range(rng.randint(1, 12))) for _ in range(vocab_size)]
    words += [",", ".", "!", "?", "😀", "👩\u200d👩\u200d👧", "e\u0301"]
    weights = [1.0 / (rank + 1) for rank in range(len(words))]
    for _ in range(n):
        yield " ".join(rng.choices(words, weights, k=rng.randint(1, 25)))


@dataclass
class SoakResult:
    docs: int = 0
    tokens: int = 0
    seconds: float = 0.0
    warmup_docs: int = 0
    rss_mb_after_warmup: float = 0.0
    rss_mb_max_after_warmup: float = 0.0
    rss_mb_final: float = 0.0
    growth_pct: float = 0.0
    peak_growth_pct: float = 0.0
    intervals_rising: int = 0
    intervals_flat: int = 0
    intervals_falling: int = 0
    rose_at_every_sample: bool = False
    torch_tensors_after_warmup: int = 0
    torch_tensors_final: int = 0
    docs_with_torch_objects: int = 0
    samples: List[List[float]] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


def soak(nlp: Language, texts: Iterator[str], *, n_docs: int, warmup: int, batch_size: int = 64,
         sample_every: int = 500) -> SoakResult:
    """Run the pipeline over ``texts`` (``n_docs`` of them) without keeping the Docs.

    RETURNS (SoakResult): RSS samples ([docs, MB], the last one taken after the run) and the
        growth after ``warmup`` Docs, to the last sample and to the largest.
    """
    process = psutil.Process()
    result = SoakResult(warmup_docs=warmup)
    start = time.monotonic()
    after_warmup_mb = None
    after_warmup: List[float] = []  # unrounded readings after the warm-up, the final one included
    i = 0
    for i, doc in enumerate(nlp.pipe(texts, batch_size=batch_size), start=1):
        result.tokens += len(doc)
        if not holds_only_numpy(doc):
            result.docs_with_torch_objects += 1
        if i == warmup:
            gc.collect()
            result.torch_tensors_after_warmup = _live_torch_tensors()
            after_warmup_mb = process.memory_info().rss / 2**20
            result.rss_mb_after_warmup = after_warmup_mb
        if i % sample_every == 0 and i < n_docs:
            rss = process.memory_info().rss / 2**20
            result.samples.append([i, round(rss, 1)])
            if after_warmup_mb is not None and i > warmup:
                after_warmup.append(rss)
        del doc
    result.docs = i
    result.seconds = round(time.monotonic() - start, 1)
    gc.collect()
    result.torch_tensors_final = _live_torch_tensors()
    final = process.memory_info().rss / 2**20
    result.samples.append([i, round(final, 1)])
    result.rss_mb_final = round(final, 1)
    if after_warmup_mb:
        after_warmup.append(final)
        describe_growth(result, after_warmup_mb, after_warmup)
    result.rss_mb_after_warmup = round(result.rss_mb_after_warmup, 1)
    return result


def describe_growth(result: SoakResult, start_mb: float, readings: Sequence[float]) -> None:
    """Fill in ``result``'s growth from ``start_mb`` (the end of the warm-up) over ``readings``
    (every reading after it, in order, the final one last), in place.

    Intervals are counted on readings rounded to 0.1 MB, as the samples are written: a change
    below that is flat.
    """
    result.rss_mb_max_after_warmup = round(max(readings), 1)
    result.growth_pct = round(100.0 * (readings[-1] - start_mb) / start_mb, 2)
    result.peak_growth_pct = round(100.0 * (max(readings) - start_mb) / start_mb, 2)
    curve = [round(mb, 1) for mb in (start_mb, *readings)]
    steps = [after - before for before, after in zip(curve, curve[1:])]
    result.intervals_rising = sum(1 for step in steps if step > 0)
    result.intervals_flat = sum(1 for step in steps if step == 0)
    result.intervals_falling = sum(1 for step in steps if step < 0)
    result.rose_at_every_sample = bool(steps) and result.intervals_rising == len(steps)


def holds_only_numpy(doc: Any) -> bool:
    """doc._.elmo.layers is float32 numpy that owns its data, and nothing in user_data is torch."""
    layers = doc._.elmo.layers
    if type(layers) is not np.ndarray or layers.dtype != np.float32 or not layers.flags.owndata:
        return False
    return not any(_is_torch(value) for value in doc.user_data.values())


def _is_torch(value: Any) -> bool:
    if isinstance(value, (torch.Tensor, torch.nn.Module)):
        return True
    if isinstance(value, np.ndarray):
        return value.base is not None and not isinstance(value.base, (np.ndarray, bytes))
    attributes = getattr(value, "__dict__", None)
    return attributes is not None and any(_is_torch(v) for v in attributes.values())


def _live_torch_tensors() -> int:
    with warnings.catch_warnings():  # isinstance() touches deprecated torch objects
        warnings.simplefilter("ignore")
        return sum(1 for obj in gc.get_objects() if isinstance(obj, torch.Tensor))
