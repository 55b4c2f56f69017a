"""Sense neighbours: corpus sentences whose use of a word is closest to a query's (cosine on ELMo vectors).

Peters et al. (2018, table 4) show that GloVe's neighbours of "play" are all sports words,
while the biLM's contextual vectors retrieve sentences that use "play" in the same sense
and part of speech. ``search_neighbors`` does that retrieval for one query over a corpus stream,
``SenseIndex`` for many queries over one corpus; ``static_neighbors`` gives the context-free
comparison (layer 0, the char-CNN alone).

Memory does not grow with the corpus:

- A corpus line longer than ``bilm.batching.MAX_WINDOW`` tokens (a paragraph, or a whole file without
  a line break) is cut into windows as the elmo component cuts it, each a corpus sentence of its own.
- The biLM runs on at most ``EMBED_TOKENS`` tokens at a time, and only their chosen layer's rows of
  the word are kept past the pass, as copies (a view would hold the window's every layer alive).
- ``search_neighbors`` keeps the ``k`` best uses seen so far (``NearestUses``, a heap), whatever
  the number of matches; ``SenseIndex`` keeps at most ``max_uses`` uses a word, a seeded sample
  (``io.text_input.Reservoir``, the one ``usages`` and ``change --max-uses`` draw), as float32 rows.
  Both say how many uses they saw and how many they kept.
"""
import heapq
from dataclasses import dataclass
from typing import Any, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

import numpy as np

from ..bilm import BiLM
from ..bilm.batching import windows
from ..bilm.scalar_mix import Layer, select_layer
from ..io.text_input import Reservoir

# words of the corpus vocabulary run through the biLM at a time (only layer 0 of each is kept)
STATIC_CHUNK = 4096
# corpus tokens run through the biLM at a time: their layers are the largest thing a search holds
EMBED_TOKENS = 8192
# uses kept a word by an index (a seeded sample beyond it), as `usages` keeps a target's by default
MAX_USES = 1000


@dataclass(frozen=True)
class Neighbor:
    """score (float): cosine similarity. sentence (Tuple[str, ...]): the corpus sentence.
    position (int): index of the matching token in the sentence."""

    score: float
    sentence: Tuple[str, ...]
    position: int

    def highlighted(self) -> str:
        words = list(self.sentence)
        words[self.position] = f"[{words[self.position]}]"
        return " ".join(words)


def _unit(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=-1, keepdims=True)
    return vectors / np.maximum(norms, 1e-12)


def word_rows(
    bilm: BiLM, sentences: Iterable[Tuple[str, ...]], wanted: Optional[set], layer: Layer, *, batch_size: int = 64,
) -> Iterator[Tuple[Tuple[str, ...], List[int], np.ndarray]]:
    """Each sentence that uses a wanted word (lower-cased; every word if ``wanted`` is None), with the
    positions of those uses and their rows of ``layer``, unit length, copied out of the sentence's layers.

    RETURNS (Iterator): (sentence, positions, (len(positions), width) float32), in corpus order; the
        biLM runs on at most ``EMBED_TOKENS`` tokens at a time.
    """
    chunk: List[Tuple[Tuple[str, ...], List[int]]] = []
    tokens = 0

    def flush() -> Iterator[Tuple[Tuple[str, ...], List[int], np.ndarray]]:
        embedded = bilm.embed([list(s) for s, _ in chunk], batch_size=batch_size)
        for (sentence, positions), layers in zip(chunk, embedded):
            yield sentence, positions, _unit(np.array(select_layer(layers, layer)[positions], dtype=np.float32))

    for sentence in sentences:
        positions = [i for i, t in enumerate(sentence) if wanted is None or t.lower() in wanted]
        if not positions:
            continue
        chunk.append((tuple(sentence), positions))
        tokens += len(sentence)
        if tokens >= EMBED_TOKENS:
            yield from flush()
            chunk, tokens = [], 0
    if chunk:
        yield from flush()


class SenseIndex:
    """Contextual vectors of the uses of words (lower-cased) in a corpus, for many queries: at most
    ``max_uses`` a word, a seeded sample of its uses where the corpus holds more.

    bilm (BiLM): the model.
    sentences (Iterable[Sequence[str]]): the tokenized corpus.
    layer (Layer): which representation to compare: "mean" of all layers (default), or a layer index.
    words (Optional[Iterable[str]]): index only these words (lower-cased); all words if None.
    batch_size (int): sentences per biLM batch.
    max_uses (int): uses kept a word. seed (int): the sample's seed (each word sampled with its own).
    """

    def __init__(
        self,
        bilm: BiLM,
        sentences: Iterable[Sequence[str]],
        *,
        layer: Layer = "mean",
        words: Optional[Iterable[str]] = None,
        batch_size: int = 64,
        max_uses: int = MAX_USES,
        seed: int = 0,
    ) -> None:
        self.bilm = bilm
        self.layer = layer
        self.max_uses = max_uses
        self.seed = seed
        self.sentences_using = 0
        self._samples: Dict[str, Reservoir] = {}
        wanted = None if words is None else {w.lower() for w in words}
        for sentence, positions, rows in word_rows(bilm, (tuple(s) for s in sentences), wanted, layer, batch_size=batch_size):
            self.sentences_using += 1
            for position, row in zip(positions, rows):
                key = sentence[position].lower()
                sample = self._samples.get(key)
                if sample is None:
                    sample = self._samples[key] = Reservoir(max_uses, f"{seed}:{key}")
                place = sample.slot()
                if place is not None:
                    sample.put(place, (sentence, position, row.copy()))
        self._vectors = {w: np.stack([row for _, _, row in s.kept()]) for w, s in self._samples.items()}
        self._uses = {w: [(sentence, position) for sentence, position, _ in s.kept()] for w, s in self._samples.items()}

    def __len__(self) -> int:
        """RETURNS (int): corpus sentences that use an indexed word."""
        return self.sentences_using

    def seen(self, word: str) -> int:
        """RETURNS (int): the corpus uses of ``word`` (case-insensitive)."""
        sample = self._samples.get(word.lower())
        return 0 if sample is None else sample.seen

    def kept(self, word: str) -> int:
        """RETURNS (int): the uses of ``word`` the index holds (at most ``max_uses``)."""
        return len(self._uses.get(word.lower(), ()))

    def query(self, sentence: Sequence[str], position: int, *, k: int = 5) -> List[Neighbor]:
        """The k kept uses of ``sentence[position]`` closest to this one, best first.

        sentence (Sequence[str]): the query sentence, tokenized.
        position (int): index of the target word in it.
        k (int): how many neighbours.
        RETURNS (List[Neighbor]): empty if the corpus never uses the word.
        """
        if not 0 <= position < len(sentence):
            raise ValueError(f"position {position} is outside the query sentence of {len(sentence)} tokens")
        key = sentence[position].lower()
        if key not in self._vectors:
            return []
        scores = self._vectors[key] @ query_vector(self.bilm, sentence, position, self.layer)
        best = np.argsort(-scores, kind="stable")
        found: List[Neighbor] = []
        for i in best:
            used, pos = self._uses[key][i]
            if used == tuple(sentence) and pos == position:
                continue  # the query itself, when it is in the corpus
            found.append(Neighbor(float(scores[i]), used, pos))
            if len(found) == k:
                break
        return found


def query_vector(bilm: BiLM, sentence: Sequence[str], position: int, layer: Layer) -> np.ndarray:
    """RETURNS (np.ndarray): the unit vector of ``sentence[position]`` at ``layer``."""
    [layers] = bilm.embed([list(sentence)])
    return _unit(np.array(select_layer(layers, layer)[position], dtype=np.float32))


class NearestUses:
    """The ``k`` uses closest to a query among those offered one by one: a heap of ``k`` entries,
    so memory does not depend on how many are offered. Ties keep the earlier use.

    k (int): neighbours kept. target (np.ndarray): the query's unit vector.
    skip (Optional[Tuple[Tuple[str, ...], int]]): a use never kept (the query itself, where the
        corpus holds it).
    """

    def __init__(self, k: int, target: np.ndarray, skip: Optional[Tuple[Tuple[str, ...], int]] = None) -> None:
        if k < 1:
            raise ValueError(f"k must be at least 1, not {k}")
        self.k = k
        self.target = target
        self.skip = skip
        self.seen = 0
        self._heap: List[Tuple[float, int, Tuple[str, ...], int]] = []

    def offer(self, sentence: Tuple[str, ...], positions: Sequence[int], rows: np.ndarray) -> None:
        """One sentence's uses: ``rows`` (unit, one a position) scored against the target."""
        for position, score in zip(positions, (rows @ self.target).tolist()):
            if (sentence, position) == self.skip:
                continue
            entry = (score, -self.seen, sentence, position)  # the smallest is the worst: lower score, later use
            self.seen += 1
            if len(self._heap) < self.k:
                heapq.heappush(self._heap, entry)
            elif entry[:2] > self._heap[0][:2]:
                heapq.heapreplace(self._heap, entry)

    def __len__(self) -> int:
        return len(self._heap)

    def best(self) -> List[Neighbor]:
        """RETURNS (List[Neighbor]): the kept uses, best first."""
        return [Neighbor(score, sentence, position)
                for score, _, sentence, position in sorted(self._heap, key=lambda e: (-e[0], -e[1]))]


def static_neighbors(bilm: BiLM, word: str, vocabulary: Iterable[str], *, k: int = 5) -> List[Tuple[str, float]]:
    """Nearest other words by layer 0 (the context-free char-CNN vector), like a static embedding.

    RETURNS (List[Tuple[str, float]]): (word, cosine), best first.
    """
    words = sorted({w for w in vocabulary if w.lower() != word.lower()})
    if not words:
        return []
    every = [word, *words]
    vectors = _unit(np.concatenate([
        np.stack([e[0, 0] for e in bilm.embed([[w] for w in every[i : i + STATIC_CHUNK]], batch_size=256)])
        for i in range(0, len(every), STATIC_CHUNK)
    ]))
    scores = vectors[1:] @ vectors[0]
    best = np.argsort(-scores, kind="stable")[:k]
    return [(words[i], float(scores[i])) for i in best]


@dataclass
class NeighborSearch:
    """What ``search_neighbors`` found: the query, the word's corpus uses nearest to its use there,
    and layer 0's nearest words.

    query (List[str]): the query's tokens. position (int): the word's place in it.
    layer (Layer): the layer compared. uses (int): corpus sentences using the word.
    sentences (int): corpus sentences read. neighbors (List[Neighbor]): nearest first.
    static (List[Tuple[str, float]]): layer 0's nearest corpus words, with their cosines.
    uses_seen (int): the word's uses in the corpus, each scored (the query itself left out where the
        corpus holds it). uses_kept (int): those held at the end, the neighbours: at most k, whatever
        the corpus holds.
    """

    query: List[str]
    position: int
    layer: Layer
    uses: int
    sentences: int
    neighbors: List[Neighbor]
    static: List[Tuple[str, float]]
    uses_seen: int = 0
    uses_kept: int = 0

    def to_dict(self) -> Dict[str, object]:
        return {
            "corpus_sentences": self.sentences, "query": self.query, "word": self.query[self.position],
            "layer": self.layer, "sentences_using_word": self.uses, "uses_seen": self.uses_seen,
            "uses_kept": self.uses_kept,
            "neighbors": [{"score": h.score, "sentence": " ".join(h.sentence), "position": h.position} for h in self.neighbors],
            "static_neighbors": [{"score": score, "word": other} for other, score in self.static],
        }


def parse_query(tokenizer, query: str, word: str) -> Tuple[List[str], int]:
    """The query's tokens and the place of ``word``'s first use (case-insensitive) in them.

    RETURNS (Tuple[List[str], int]): raises ValueError where the word is not a token of the query.
    """
    tokens = [t.text for t in tokenizer(query)]
    lowered = [t.lower() for t in tokens]
    if word.lower() not in lowered:
        raise ValueError(f"{word!r} is not a token of the query {tokens}")
    return tokens, lowered.index(word.lower())


def search_neighbors(
    bilm: BiLM, lines: Iterable[Any], tokenizer, query: str, word: str, *, k: int = 5, layer: str = "mean",
    batch_size: int = 64,
) -> NeighborSearch:
    """The corpus uses of ``word`` nearest to its use in ``query``, and its static neighbours, in one
    pass over the corpus that holds only the ``k`` best uses so far (``NearestUses``).

    lines (Iterable[TextLine]): the corpus, one sentence or paragraph each (``io.text_input.read_lines``;
        empty ones skipped); a line, or a query, longer than ``MAX_WINDOW`` tokens runs in windows.
    tokenizer (Callable): a spaCy tokenizer. layer (str): "mean" or a layer index.
    RETURNS (NeighborSearch): the result.
    """
    chosen: Optional[Layer] = layer if layer == "mean" else int(layer) if str(layer).lstrip("-").isdigit() else None
    if chosen is None:
        raise ValueError(f"--layers must be 'mean' or a layer index, not {layer!r}")
    tokens, position = parse_query(tokenizer, query, word)
    begin, end = next((b, e) for b, e in windows(0, len(tokens)) if b <= position < e)
    tokens, position = tokens[begin:end], position - begin
    nearest = NearestUses(k, query_vector(bilm, tokens, position, chosen), skip=(tuple(tokens), position))
    vocabulary: set = set()
    counts = {"sentences": 0, "using": 0}

    def corpus() -> Iterator[Tuple[str, ...]]:
        for doc in tokenizer.pipe(line.text for line in lines if line.text.strip()):
            words = [t.text for t in doc if not t.is_space]
            del doc  # a line of megabytes: its Doc goes before its windows run
            vocabulary.update(t for t in words if t.isalpha())
            for b, e in windows(0, len(words)):
                counts["sentences"] += 1
                yield tuple(words[b:e])

    for sentence, positions, rows in word_rows(bilm, corpus(), {word.lower()}, chosen, batch_size=batch_size):
        counts["using"] += 1
        nearest.offer(sentence, positions, rows)
    return NeighborSearch(tokens, position, chosen, counts["using"], counts["sentences"], nearest.best(),
                          static_neighbors(bilm, word, vocabulary, k=k), uses_seen=nearest.seen, uses_kept=len(nearest))
