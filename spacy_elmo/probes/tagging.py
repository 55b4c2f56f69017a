"""Token-tagging probes (UPOS, named entities): a linear classifier per representation, plus baselines."""
from collections import Counter
from typing import Dict, List, Sequence

import numpy as np

from .features import VectorCache
from .linear import accuracy, majority_class, train_linear
from .ner import entity_f1
from .representations import MAJORITY, MIX, WORD_IDENTITY, fixed_rows, row_vectors
from .result import TaskResult
from .task_data import TaskData


def probe_tagging(data: TaskData, cache: VectorCache, *, seed: int) -> TaskResult:
    """Train a softmax-regression probe on each layer, the mean and a learned mix; score the eval data.

    ``upos`` is scored as token accuracy, ``ner`` as entity F1 over BIO tags.
    RETURNS (TaskResult): scores per row, with the majority-class and word-identity baselines.
    """
    train_tags = [tags for _, tags in data.train]
    eval_tags = [tags for _, tags in data.eval]
    names = sorted({tag for tags in train_tags for tag in tags})
    ids = {name: i for i, name in enumerate(names)}
    y_train = np.array([ids[t] for tags in train_tags for t in tags], dtype=np.int64)
    y_eval = np.array([ids.get(t, -1) for tags in eval_tags for t in tags], dtype=np.int64)
    x_train = _stacked(cache.layers([s for s, _ in data.train], source=data.train_file, label=f"{data.task} train"))
    x_eval = _stacked(cache.layers([s for s, _ in data.eval], source=data.eval_file, label=f"{data.task} eval"))

    def score(predicted: np.ndarray) -> float:
        if data.task == "ner":
            return entity_f1(eval_tags, _split([names[i] for i in predicted], eval_tags))
        return accuracy(predicted, y_eval)

    scores: Dict[str, float] = {}
    for row in fixed_rows(x_train.shape[0]):
        head = train_linear(row_vectors(x_train, row)[None], y_train, len(names), seed=seed)
        scores[row] = score(head.predict(row_vectors(x_eval, row)[None]))
    mixed = train_linear(x_train, y_train, len(names), learn_mix=True, seed=seed)
    scores[MIX] = score(mixed.predict(x_eval))
    majority = majority_class(y_train)
    scores[MAJORITY] = score(np.full(len(y_eval), majority))
    scores[WORD_IDENTITY] = score(_word_identity(data, ids, majority))
    return TaskResult(
        task=data.task,
        metric="entity F1" if data.task == "ner" else "accuracy",
        scores=scores,
        sizes=data.sizes(),
        data=data.files(),
        details={
            "classes": len(names),
            "mix_weights": [round(float(w), 4) for w in mixed.layer_weights],
            "mix_gamma": round(float(mixed.gamma), 4),
            **data.details,
        },
    )


def _stacked(per_sentence: List[np.ndarray]) -> np.ndarray:
    return np.concatenate(per_sentence, axis=1)


def _split(flat: Sequence[str], like: Sequence[Sequence[str]]) -> List[List[str]]:
    out, start = [], 0
    for tags in like:
        out.append(list(flat[start : start + len(tags)]))
        start += len(tags)
    return out


def _word_identity(data: TaskData, ids: Dict[str, int], majority: int) -> np.ndarray:
    """Each word form's most frequent training tag (a static, context-free tagger); unknown words get the majority."""
    counts: Dict[str, Counter] = {}
    for tokens, tags in data.train:
        for token, tag in zip(tokens, tags):
            counts.setdefault(token, Counter())[ids[tag]] += 1
    best = {token: max(sorted(c), key=c.__getitem__) for token, c in counts.items()}
    return np.array([best.get(token, majority) for tokens, _ in data.eval for token in tokens], dtype=np.int64)
