"""Word-sense probes by cosine on frozen vectors, as in Peters et al. (2018, section 5.3).

WSD: each sense's training uses are averaged into a sense vector; a test use gets the nearest
of its word's sense vectors. Beside it (``details["nearest_use"]``) the plain 1-nearest-neighbour
classifier: a test use takes the sense of its word's most similar training use, for each
representation and for the model's default token vectors (its ``vector_setting``: the mix and
means ``token._.elmo`` uses), the figure a user of the default vectors meets. Ties go to the sense more frequent in training: a context-free
layer gives every use of a word form one vector, and so equal similarities to all its senses,
where it then falls back on the most frequent sense instead of an arbitrary one. WiC: two uses of a word mean the same when the cosine of their
vectors is above a threshold tuned on the training pairs. Neither has a gradient to learn a
layer mix with, so the scalar mix is the grid point (``simplex_weights``) that scores best on
the training data: WSD leave-one-out (each training use against sense vectors without it), WiC
with its own tuned threshold.
"""
from collections import Counter
from typing import Dict, List, Sequence, Tuple

import numpy as np

from .features import VectorCache
from .linear import accuracy
from .representations import MAJORITY, MIX, fixed_rows, mix, row_weights, simplex_weights, unit
from .result import TaskResult
from .task_data import TaskData

TIE = 1e-6  # similarities closer than this count as equal


def probe_wsd(data: TaskData, cache: VectorCache, *, seed: int) -> TaskResult:
    """Nearest-sense-vector accuracy per representation, and the most-frequent-sense baseline."""
    del seed  # no randomness beyond the split made when the data were read
    train_vectors = _targets(cache, [u.tokens for u in data.train], [u.position for u in data.train], data.train_file, "wsd train")
    eval_vectors = _targets(cache, [u.tokens for u in data.eval], [u.position for u in data.eval], data.eval_source, "wsd eval")
    senses = sorted({(u.word, u.sense) for u in data.train})
    sense_ids = {s: i for i, s in enumerate(senses)}
    y_train = np.array([sense_ids[(u.word, u.sense)] for u in data.train])
    y_eval = np.array([sense_ids.get((u.word, u.sense), -1) for u in data.eval])
    allowed_train = _allowed(senses, [u.word for u in data.train])
    allowed_eval = _allowed(senses, [u.word for u in data.eval])
    prior = _sense_shares(senses, y_train)

    n_layers = train_vectors.shape[0]
    best = max(
        simplex_weights(n_layers), key=lambda w: _leave_one_out(mix(train_vectors, w), y_train, allowed_train, prior)
    )
    candidates = {**{row: row_weights(row, n_layers) for row in fixed_rows(n_layers)}, MIX: best}
    scores: Dict[str, float] = {}
    for row, weights in candidates.items():
        centroids = _centroids(mix(train_vectors, weights), y_train, len(senses))
        scores[row] = accuracy(_predict(mix(eval_vectors, weights), centroids, allowed_eval, prior), y_eval)
    scores[MAJORITY] = accuracy(_most_frequent_sense(data, sense_ids), y_eval)
    same_word = np.array([u.word for u in data.eval])[:, None] == np.array([u.word for u in data.train])[None, :]
    setting = getattr(cache.model, "vector_setting", None)
    nearest_use = {
        row: accuracy(_nearest_use(mix(eval_vectors, w), mix(train_vectors, w), y_train, same_word, prior), y_eval)
        for row, w in candidates.items()
    }
    if setting is not None and setting.n_layers == n_layers:
        nearest_use[DEFAULT_VECTORS] = accuracy(
            _nearest_use(default_vectors(eval_vectors, setting), default_vectors(train_vectors, setting), y_train,
                         same_word, prior), y_eval)
    return TaskResult(
        task="wsd", metric="accuracy", scores=scores, sizes=data.sizes(), data=data.files(),
        details={"words": len({w for w, _ in senses}), "senses": len(senses), "mix_weights": list(best),
                 "nearest_use": nearest_use,
                 "default_layer_weights": None if setting is None else list(setting.layer_weights), **data.details},
    )


DEFAULT_VECTORS = "default vectors"


def default_vectors(stacked: np.ndarray, setting) -> np.ndarray:
    """RETURNS (np.ndarray): (N, width) the token vectors a ``VectorSetting`` makes of (L+1, N, width) layers:
    each layer's corpus mean taken off (where the setting has means), then its fixed mix."""
    centred = stacked if setting.layer_means is None else stacked - setting.layer_means[:, None, :].astype(stacked.dtype)
    return mix(centred, setting.layer_weights)


def _nearest_use(
    vectors: np.ndarray, train_vectors: np.ndarray, y_train: np.ndarray, same_word: np.ndarray, prior: np.ndarray
) -> np.ndarray:
    """1-NN: the sense of each use's most similar training use of the same word (by cosine); on a tie
    (within TIE) the sense more frequent in training, as a context-free layer ties every use."""
    similarities = unit(vectors) @ unit(train_vectors).T + TIE * prior[y_train][None, :]
    nearest = np.where(same_word, similarities, -np.inf).argmax(axis=1)
    return np.where(same_word.any(axis=1), y_train[nearest], -1)


def probe_wic(data: TaskData, cache: VectorCache, *, seed: int) -> TaskResult:
    """Same-meaning accuracy by a cosine threshold per representation, and the majority-label baseline."""
    del seed
    train = pair_vectors(data.train, cache, data.train_file, "wic train")
    held_out = pair_vectors(data.eval, cache, data.eval_file, "wic eval")
    y_train = np.array([p.same for p in data.train])
    y_eval = np.array([p.same for p in data.eval])

    def similarities(pair: Tuple[np.ndarray, np.ndarray], weights: Tuple[float, ...]) -> np.ndarray:
        return np.sum(unit(mix(pair[0], weights)) * unit(mix(pair[1], weights)), axis=-1)

    n_layers = train[0].shape[0]
    scores: Dict[str, float] = {}
    thresholds: Dict[str, float] = {}
    tuned = {w: best_threshold(similarities(train, w), y_train) for w in simplex_weights(n_layers)}
    best = max(tuned, key=lambda w: tuned[w][1])
    candidates = {**{row: row_weights(row, n_layers) for row in fixed_rows(n_layers)}, MIX: best}
    for row, weights in candidates.items():
        threshold, _ = best_threshold(similarities(train, weights), y_train)
        thresholds[row] = round(threshold, 4)
        scores[row] = accuracy(similarities(held_out, weights) > threshold, y_eval)
    scores[MAJORITY] = accuracy(np.full(len(y_eval), Counter(y_train.tolist()).most_common(1)[0][0]), y_eval)
    return TaskResult(
        task="wic", metric="accuracy", scores=scores, sizes=data.sizes(), data=data.files(),
        details={"thresholds": thresholds, "mix_weights": list(best), **data.details},
    )


def best_threshold(similarities: np.ndarray, same: np.ndarray) -> Tuple[float, float]:
    """The cosine above which a pair is called 'same meaning' that is most accurate on these pairs.

    RETURNS (Tuple[float, float]): (threshold, accuracy in percent); the threshold is a midpoint
        between neighbouring similarities, so it separates them whatever their spacing.
    """
    order = np.argsort(similarities, kind="stable")
    values, labels = similarities[order], same[order].astype(np.int64)
    # calling everything above cut k 'same' is right for the 'different' below and the 'same' above
    correct = np.concatenate([[0], np.cumsum(1 - labels)]) + labels.sum() - np.concatenate([[0], np.cumsum(labels)])
    cut = int(np.argmax(correct))
    edges = np.concatenate([[values[0] - 1.0], (values[:-1] + values[1:]) / 2, [values[-1] + 1.0]])
    return float(edges[cut]), 100.0 * float(correct[cut]) / len(labels)


def _targets(cache: VectorCache, sentences: Sequence[Tuple[str, ...]], positions: Sequence[int], source, label) -> np.ndarray:
    """RETURNS (np.ndarray): (L+1, N, width), each sentence's vectors at its target position."""
    layers = cache.layers(list(sentences), source=source, label=label)
    return np.stack([array[:, position] for array, position in zip(layers, positions)], axis=1)


def pair_vectors(pairs, cache: VectorCache, source, label) -> Tuple[np.ndarray, np.ndarray]:
    """RETURNS (Tuple[np.ndarray, np.ndarray]): the (L+1, N, width) vectors of the WiC pairs' targets
    in their first and in their second sentences."""
    sentences = [p.first for p in pairs] + [p.second for p in pairs]
    positions = [p.positions[0] for p in pairs] + [p.positions[1] for p in pairs]
    both = _targets(cache, sentences, positions, source, label)
    return both[:, : len(pairs)], both[:, len(pairs) :]


def _allowed(senses: List[Tuple[str, str]], words: Sequence[str]) -> np.ndarray:
    """(N, S) mask: which senses each use's word has."""
    sense_words = np.array([w for w, _ in senses])
    return np.array(words)[:, None] == sense_words[None, :]


def _sense_shares(senses: List[Tuple[str, str]], labels: np.ndarray) -> np.ndarray:
    """(S,) each sense's share of its word's training uses."""
    counts = np.bincount(labels, minlength=len(senses)).astype(np.float64)
    words = np.array([w for w, _ in senses])
    totals = np.array([counts[words == w].sum() for w in words])
    return counts / np.maximum(totals, 1.0)


def _centroids(vectors: np.ndarray, labels: np.ndarray, n_senses: int) -> np.ndarray:
    sums = np.zeros((n_senses, vectors.shape[1]), dtype=np.float64)
    np.add.at(sums, labels, vectors)
    return unit(sums)


def _choose(similarities: np.ndarray, allowed: np.ndarray, prior: np.ndarray) -> np.ndarray:
    """The allowed sense of highest similarity, the more frequent on a tie (within TIE)."""
    return np.where(allowed, similarities + TIE * prior[None, :], -np.inf).argmax(axis=1)


def _predict(vectors: np.ndarray, centroids: np.ndarray, allowed: np.ndarray, prior: np.ndarray) -> np.ndarray:
    return _choose(unit(vectors) @ centroids.T, allowed, prior)


def _leave_one_out(vectors: np.ndarray, labels: np.ndarray, allowed: np.ndarray, prior: np.ndarray) -> float:
    """Accuracy of each training use against sense vectors built without it (percent)."""
    sums = np.zeros((len(prior), vectors.shape[1]), dtype=np.float64)
    np.add.at(sums, labels, vectors)
    counts = np.bincount(labels, minlength=len(prior))
    similarities = unit(vectors) @ unit(sums).T
    own = unit(sums[labels] - vectors)
    rows = np.arange(len(labels))
    similarities[rows, labels] = np.where(counts[labels] > 1, np.sum(unit(vectors) * own, axis=1), -np.inf)
    return accuracy(_choose(similarities, allowed, prior), labels)


def _most_frequent_sense(data: TaskData, sense_ids: Dict[Tuple[str, str], int]) -> np.ndarray:
    counts: Dict[str, Counter] = {}
    for use in data.train:
        counts.setdefault(use.word, Counter())[use.sense] += 1
    return np.array(
        [sense_ids[(u.word, counts[u.word].most_common(1)[0][0])] if u.word in counts else -1 for u in data.eval]
    )
