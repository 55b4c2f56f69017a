"""Word sense induction from the biLM's own substitutes: a target's uses clustered into senses.

The method of Amrami & Goldberg (2018), "Word Sense Induction with Neural biLM and Symmetric
Patterns" (github.com/asafamr/SymPatternWSI), with one change that makes it deterministic:

1. For each use of the target, the forward LM's and the backward LM's most probable words
   (``top`` each, the head's full softmax: ``substitutes.sentence_substitutes``; the target's own
   word, ``<S>``, ``</S>``, ``<UNK>`` and one-character words left out, as SymPatternWSI does). With ``patterns`` (the paper's symmetric pattern
   "X and _"), the forward LM reads ``w1 .. wi and`` and the backward LM ``and wi .. wn``, so each
   predicts a coordinated word, which is of the target's kind and sense; without it each reads the
   context of the target's own slot.
2. A use becomes a bag of features ``f:WORD`` and ``b:WORD``. SymPatternWSI samples 20
   representatives per use from the renormalized top-k distributions (4 words per side each) and
   clusters the representatives; here each use is one bag whose weights are the renormalized
   probabilities, the expected counts of that sampling, so no seed is involved.
3. TF-IDF over the uses (scikit-learn's ``TfidfTransformer`` with its defaults: idf = ln((1 + n) /
   (1 + df)) + 1, rows L2-normalized), then agglomerative clustering with average linkage on
   cosine distance into ``n_clusters`` (the paper's 7; SymPatternWSI ``spwsi/wsi_clustering.py``).

Each sense is described by its most weighted substitutes and by example uses. simple_elmo's
``get_elmo_substitutes`` gives the same forward and backward lists per token (with raw logits).
It works with any head ``io.loading.load_lm_head`` loads: our models' softmax and the published ones.
"""
import math
from collections import Counter
from dataclasses import asdict, dataclass
from typing import Any, Dict, List, Sequence, Tuple

import numpy as np

from ..bilm.chars import BOS_TOKEN, EOS_TOKEN
from ..io.lm_head import UNK_TOKEN
from .extra import missing_statistics
from .clustering import average_linkage
from .substitutes import sentence_substitutes

try:
    from sklearn.feature_extraction import DictVectorizer
    from sklearn.feature_extraction.text import TfidfTransformer
except ImportError as err:
    raise ImportError(missing_statistics(err)) from None

PATTERN_WORD = "and"
SOURCE = ("Amrami & Goldberg (2018), github.com/asafamr/SymPatternWSI: symmetric-pattern substitutes, TF-IDF, "
          "average-linkage cosine clustering; expected counts in place of sampled representatives")


@dataclass(frozen=True)
class SenseSettings:
    """top (int): substitutes per direction. patterns (bool): the "X and _" pattern.
    n_clusters (int): senses wanted. tfidf (bool): TF-IDF weighting. examples (int): uses shown per
    sense. batch_size (int): sentences per biLM pass."""

    top: int = 20
    patterns: bool = True
    n_clusters: int = 7
    tfidf: bool = True
    examples: int = 3
    batch_size: int = 32

    def __post_init__(self) -> None:
        if self.top < 1 or self.n_clusters < 1 or self.examples < 0:
            raise ValueError("top and n_clusters must be at least 1, examples at least 0")


@dataclass(frozen=True)
class Sense:
    """label (int). size (int): its uses. substitutes (Tuple[Tuple[str, float], ...]): its most
    weighted substitutes, with their share of the sense's weight. examples (Tuple[str, ...]): uses,
    the target in brackets. members (Tuple[int, ...]): indices of its uses."""

    label: int
    size: int
    substitutes: Tuple[Tuple[str, float], ...]
    examples: Tuple[str, ...]
    members: Tuple[int, ...]

    def to_dict(self) -> Dict[str, Any]:
        record = asdict(self)
        record["substitutes"] = [{"word": w, "weight": round(s, 6)} for w, s in self.substitutes]
        return record


@dataclass(frozen=True)
class SenseInventory:
    """labels (np.ndarray): each use's sense. senses (List[Sense]): largest first.
    bags (List[Dict[str, float]]): each use's substitute bag. settings (SenseSettings)."""

    labels: np.ndarray
    senses: List[Sense]
    bags: List[Dict[str, float]]
    settings: SenseSettings


def substitute_bags(
    bilm: Any, head: Any, contexts: Sequence[Tuple[Sequence[str], int]], *, top: int = 20, patterns: bool = True,
    batch_size: int = 32,
) -> List[Dict[str, float]]:
    """Each use's forward and backward substitutes as ``{"f:WORD": p, "b:WORD": p}``, p the word's
    probability renormalized over its direction's kept words.

    contexts (Sequence[Tuple[Sequence[str], int]]): (tokens, index of the target).
    RETURNS (List[Dict[str, float]]): one bag per use.
    """
    sentences, slots = [], []
    for tokens, i in contexts:
        tokens = list(tokens)
        if not 0 <= i < len(tokens):
            raise ValueError(f"position {i} is outside a context of {len(tokens)} tokens")
        if patterns:
            slots.append((len(sentences), i + 2, len(sentences) + 1, 0))
            sentences += [tokens[: i + 1] + [PATTERN_WORD, tokens[i]], [tokens[i], PATTERN_WORD] + tokens[i:]]
        else:
            slots.append((len(sentences), i, len(sentences), i))
            sentences.append(tokens)
    distinct: Dict[Tuple[str, ...], int] = {}
    for s in sentences:
        distinct.setdefault(tuple(s), len(distinct))
    # as SymPatternWSI's bilm_elmo.py: never <S>, </S>, <UNK> or one-character words (punctuation);
    # one more than asked, as the target's own word, dropped below, may be among them
    exclude = [BOS_TOKEN, EOS_TOKEN, UNK_TOKEN, *(w for w in head.words if len(w) == 1)]
    found = sentence_substitutes(bilm, head, [list(s) for s in distinct], top=top + 1, exclude=exclude, batch_size=batch_size)
    bags = []
    for (tokens, i), (fs, fp, bs, bp) in zip(contexts, slots):
        target = tokens[i].lower()
        forward = found[distinct[tuple(sentences[fs])]][fp].forward
        backward = found[distinct[tuple(sentences[bs])]][bp].backward
        bag: Dict[str, float] = {}
        for prefix, listed in (("f", forward), ("b", backward)):
            kept = [s for s in listed if s.word.lower() != target][:top]
            if not kept:
                continue
            peak = max(s.log_prob for s in kept)
            weights = [math.exp(s.log_prob - peak) for s in kept]
            for s, w in zip(kept, weights):
                bag[f"{prefix}:{s.word}"] = w / sum(weights)
        bags.append(bag)
    return bags


def tfidf_matrix(bags: Sequence[Dict[str, float]], *, tfidf: bool = True) -> Tuple[np.ndarray, List[str]]:
    """The bags as rows of a matrix (features sorted), TF-IDF weighted and L2-normalized.

    RETURNS (Tuple[np.ndarray, List[str]]): (n_uses, n_features) and the feature names.
    """
    vectorizer = DictVectorizer(sort=True)
    counts = vectorizer.fit_transform(bags)
    features = vectorizer.get_feature_names_out().tolist()
    if not features:
        return np.zeros((len(bags), 0)), features
    counts.eliminate_zeros()  # a document frequency counts the bags that hold a feature with weight
    return TfidfTransformer(use_idf=tfidf).fit_transform(counts).toarray(), features


def induce_senses(
    bilm: Any, head: Any, contexts: Sequence[Tuple[Sequence[str], int]], settings: SenseSettings = SenseSettings()
) -> SenseInventory:
    """Cluster a target's uses into senses by their substitutes (see the module docstring).

    bilm (BiLM): the model. head (LMHead): its softmax and vocabulary (``load_lm_head``).
    contexts (Sequence[Tuple[Sequence[str], int]]): the uses: (tokens, index of the target).
    settings (SenseSettings): substitutes, pattern, clusters, examples.
    RETURNS (SenseInventory): each use's sense and each sense's description.
    """
    if not contexts:
        raise ValueError("no uses to cluster")
    bags = substitute_bags(bilm, head, contexts, top=settings.top, patterns=settings.patterns, batch_size=settings.batch_size)
    matrix, _ = tfidf_matrix(bags, tfidf=settings.tfidf)
    labels = numbered_by_size(average_linkage(matrix, settings.n_clusters))
    senses = describe_senses(labels, bags, contexts, top=10, examples=settings.examples)
    return SenseInventory(labels, senses, bags, settings)


def numbered_by_size(labels: np.ndarray) -> np.ndarray:
    """The clusters renumbered 0, 1, ... from the largest down (ties: the one whose first use comes
    first), so a sense's number is its rank, the same on every run of the same uses.

    RETURNS (np.ndarray): (n,) int labels.
    """
    found, first, inverse, sizes = np.unique(labels, return_index=True, return_inverse=True, return_counts=True)
    rank = np.empty(len(found), dtype=np.int64)
    rank[np.lexsort((first, -sizes))] = np.arange(len(found))
    return rank[inverse.reshape(-1)]


def uses_in_windows(uses: Sequence[Any], window: int) -> List[Tuple[Sequence[str], int]]:
    """Each use's context cut to ``window`` tokens on each side of the target.

    uses (Sequence[Usage]): the uses (``usages.find_usages``).
    RETURNS (List[Tuple[Sequence[str], int]]): (tokens, index of the target), as ``induce_senses`` takes them.
    """
    contexts = []
    for use in uses:
        start = max(use.token_index - window, 0)
        contexts.append((use.tokens[start : use.token_index + window + 1], use.token_index - start))
    return contexts


def senses_record(
    inventory: SenseInventory, uses: Sequence[Any], *, word: str, match: str, settings: Dict[str, Any], seen: int,
) -> Dict[str, Any]:
    """The senses and each use's sense as JSON (provenance added by the caller).

    uses (Sequence[Usage]): the uses clustered (kept). seen (int): the word's uses in the corpus.
    RETURNS (Dict[str, Any]): the record.
    """
    return {
        "word": word, "match": match, "method": SOURCE, "settings": settings, "uses_seen": seen, "uses_kept": len(uses),
        "senses": [s.to_dict() for s in inventory.senses],
        "uses": [{"doc_id": u.doc_id, "start_char": u.start_char, "end_char": u.end_char, "sense": int(label)}
                 for u, label in zip(uses, inventory.labels)],
    }


def describe_senses(
    labels: np.ndarray, bags: Sequence[Dict[str, float]], contexts: Sequence[Tuple[Sequence[str], int]], *,
    top: int = 10, examples: int = 3,
) -> List[Sense]:
    """Each cluster's most weighted substitutes (both directions summed) and its first uses.

    RETURNS (List[Sense]): largest first (ties: lower label first).
    """
    senses = []
    for label in sorted(set(int(x) for x in labels)):
        members = [i for i, x in enumerate(labels) if int(x) == label]
        weights: Counter = Counter()
        for i in members:
            for feature, w in bags[i].items():
                weights[feature.split(":", 1)[1]] += w
        total = sum(weights.values()) or 1.0
        shown = tuple(_bracketed(*contexts[i]) for i in members[:examples])
        senses.append(Sense(label, len(members), tuple((w, s / total) for w, s in weights.most_common(top)), shown, tuple(members)))
    return sorted(senses, key=lambda s: (-s.size, s.label))


def _bracketed(tokens: Sequence[str], i: int) -> str:
    return " ".join([*tokens[:i], f"[{tokens[i]}]", *tokens[i + 1:]])
