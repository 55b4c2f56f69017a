"""From token strings to per-sentence numpy arrays: batching, running the biLM, un-padding."""
from typing import TYPE_CHECKING, List, Optional, Sequence

import numpy as np
import torch

from .batching import plan_batches
from .chars import batch_char_ids

if TYPE_CHECKING:
    from .model import BiLM


def embed_sentences(
    bilm: "BiLM",
    sentences: Sequence[Sequence[str]],
    *,
    batch_size: int = 64,
    max_batch_items: Optional[int] = None,
    boundaries: bool = False,
) -> List[np.ndarray]:
    """See ``BiLM.embed``. In stateful mode sentences run in input order, batch_size at a time."""
    cfg = bilm.config
    results: List[Optional[np.ndarray]] = [None] * len(sentences)
    lengths = [len(s) for s in sentences]
    if bilm.stateful:
        batches = [list(range(i, min(i + batch_size, len(sentences)))) for i in range(0, len(sentences), batch_size)]
    else:
        batches = plan_batches(lengths, batch_size=batch_size, max_batch_items=max_batch_items)
    was_training = bilm.training
    bilm.eval()
    try:
        with torch.no_grad():
            for batch in batches:
                ids, lens = batch_char_ids([sentences[i] for i in batch], cfg.max_characters_per_token)
                out = bilm(torch.from_numpy(ids).to(bilm.device), torch.from_numpy(lens))
                layers = out.layers.float().cpu().numpy()
                for row, index in enumerate(batch):
                    n = int(lens[row])
                    span = slice(0, n) if boundaries else slice(1, n - 1)
                    results[index] = np.ascontiguousarray(layers[:, row, span])
    finally:
        bilm.train(was_training)
    return [r for r in results if r is not None]
