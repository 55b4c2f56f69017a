"""Sense neighbours: corpus sentences whose use of a word is closest to a query's (cosine on ELMo vectors).

Peters et al. (2018, table 4) show that GloVe's neighbours of "play" are all sports words,
while the biLM's contextual vectors retrieve sentences that use "play" in the same sense
and part of speech. ``SenseIndex`` does that retrieval for any word of a query sentence;
``static_neighbors`` gives the context-free comparison (layer 0, the char-CNN alone).

A corpus line longer than ``bilm.batching.MAX_WINDOW`` tokens (a paragraph, or a whole file without a
line break) is cut into windows as the elmo component cuts it, each a corpus sentence of its own, so
memory does not grow with the length of a line.
"""
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple, Union

import numpy as np

from ..bilm import BiLM
from ..bilm.batching import windows
from ..bilm.scalar_mix import Layer, select_layer

# words of the corpus vocabulary run through the biLM at a time (only layer 0 of each is kept)
STATIC_CHUNK = 4096


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


class SenseIndex:
    """Contextual vectors of every occurrence of every word (lower-cased) in a corpus.

    bilm (BiLM): the model.
    sentences (Iterable[Sequence[str]]): the tokenized corpus.
    layer (Layer): which representation to compare: "mean" of all layers (default), or a layer index.
    words (Optional[Iterable[str]]): index only these words (lower-cased); all words if None.
    batch_size (int): sentences per biLM batch.
    """

    def __init__(
        self,
        bilm: BiLM,
        sentences: Iterable[Sequence[str]],
        *,
        layer: Layer = "mean",
        words: Optional[Iterable[str]] = None,
        batch_size: int = 64,
    ) -> None:
        self.bilm = bilm
        self.layer = layer
        wanted = None if words is None else {w.lower() for w in words}
        self.sentences: List[Tuple[str, ...]] = []
        occurrences: Dict[str, List[Tuple[int, int]]] = {}
        vectors: Dict[str, List[np.ndarray]] = {}
        chunk: List[Tuple[str, ...]] = []
        for sentence in sentences:
            chunk.append(tuple(sentence))
            if len(chunk) >= batch_size * 4:
                self._add(chunk, wanted, occurrences, vectors, batch_size)
                chunk = []
        if chunk:
            self._add(chunk, wanted, occurrences, vectors, batch_size)
        self._occurrences = occurrences
        self._vectors = {w: _unit(np.stack(v)) for w, v in vectors.items()}

    def _add(self, chunk, wanted, occurrences, vectors, batch_size) -> None:
        keep = [s for s in chunk if wanted is None or any(t.lower() in wanted for t in s)]
        for layers, sentence in zip(self.bilm.embed(keep, batch_size=batch_size), keep):
            index = len(self.sentences)
            self.sentences.append(sentence)
            selected = select_layer(layers, self.layer)
            for position, token in enumerate(sentence):
                key = token.lower()
                if wanted is None or key in wanted:
                    occurrences.setdefault(key, []).append((index, position))
                    vectors.setdefault(key, []).append(selected[position])

    def __len__(self) -> int:
        return len(self.sentences)

    def query(self, sentence: Sequence[str], position: int, *, k: int = 5) -> List[Neighbor]:
        """The k corpus uses of ``sentence[position]`` closest to this one, best first.

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
        [layers] = self.bilm.embed([list(sentence)])
        target = _unit(select_layer(layers, self.layer)[position])
        scores = self._vectors[key] @ target
        best = np.argsort(-scores, kind="stable")
        found: List[Neighbor] = []
        for i in best:
            sent_index, pos = self._occurrences[key][i]
            if self.sentences[sent_index] == tuple(sentence) and pos == position:
                continue  # the query itself, when it is in the corpus
            found.append(Neighbor(float(scores[i]), self.sentences[sent_index], pos))
            if len(found) == k:
                break
        return found


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
    """

    query: List[str]
    position: int
    layer: Layer
    uses: int
    sentences: int
    neighbors: List[Neighbor]
    static: List[Tuple[str, float]]

    def to_dict(self) -> Dict[str, object]:
        return {
            "corpus_sentences": self.sentences, "query": self.query, "word": self.query[self.position],
            "layer": self.layer, "sentences_using_word": self.uses,
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
    bilm: BiLM, lines: Iterable[Any], tokenizer, query: str, word: str, *, k: int = 5, layer: str = "mean"
) -> NeighborSearch:
    """The corpus uses of ``word`` nearest to its use in ``query``, and its static neighbours.

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
    words = ([t.text for t in doc if not t.is_space] for doc in tokenizer.pipe(line.text for line in lines if line.text.strip()))
    sentences = [line[b:e] for line in words for b, e in windows(0, len(line))]
    index = SenseIndex(bilm, sentences, words=[word], layer=chosen)
    vocabulary = {t for s in sentences for t in s if t.isalpha()}
    return NeighborSearch(tokens, position, chosen, len(index), len(sentences), index.query(tokens, position, k=k),
                          static_neighbors(bilm, word, vocabulary, k=k))
