"""Length-bucketed batches capped by sentence count and by padded positions, and the windows a
long sentence is cut into."""
from typing import List, Optional, Sequence, Tuple

# most tokens run through the biLM as one sentence: the elmo component's default ``max_window``, and
# what every command that reads text cuts a longer line into (the activations of one sequence grow
# with its length: a 5 MB line run whole needs tens of gigabytes)
MAX_WINDOW = 200


def windows(start: int, end: int, max_window: int = MAX_WINDOW) -> List[Tuple[int, int]]:
    """The consecutive [begin, end) ranges of at most ``max_window`` tokens that cover [start, end)
    (the last one shorter); each runs through the biLM as a sentence of its own, with its own <S>
    and </S>, so context does not cross a window edge.

    max_window (int): most tokens per window (>= 1).
    RETURNS (List[Tuple[int, int]]): in order; [] where ``end <= start``.
    """
    if max_window < 1:
        raise ValueError(f"max_window must be >= 1, not {max_window}")
    return [(begin, min(begin + max_window, end)) for begin in range(start, end, max_window)]


def plan_batches(
    lengths: Sequence[int], *, batch_size: int, max_batch_items: Optional[int] = None
) -> List[List[int]]:
    """Group indices of similar length into batches.

    lengths (Sequence[int]): length of each item.
    batch_size (int): most items per batch (>= 1).
    max_batch_items (Optional[int]): most padded positions (items x longest) per batch; an item
        longer than this on its own forms a batch alone.
    RETURNS (List[List[int]]): batches of indices; every index appears exactly once.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, not {batch_size}")
    if max_batch_items is not None and max_batch_items < 1:
        raise ValueError(f"max_batch_items must be >= 1, not {max_batch_items}")
    order = sorted(range(len(lengths)), key=lambda i: lengths[i], reverse=True)
    batches: List[List[int]] = []
    current: List[int] = []
    for index in order:
        if current:
            # sorted by decreasing length: the first item is the batch's longest
            longest = max(lengths[current[0]], 1)
            too_big = max_batch_items is not None and (len(current) + 1) * longest > max_batch_items
            if len(current) >= batch_size or too_big:
                batches.append(current)
                current = []
        current.append(index)
    if current:
        batches.append(current)
    return batches
