"""Every biLM layer of every sentence to HDF5, as bilm-tf's ``dump_bilm_embeddings`` writes them:
dataset "i" holds sentence i's layers, shape (L+1, n_tokens, width).

A sentence longer than ``max_window`` tokens runs in consecutive windows, as the elmo component runs
it (``bilm.batching.windows``), and its dataset is written window by window: memory stays that of a
few batches of windows whatever the length of a line (a 5 MB line run whole asked for 12.8 GB).
"""
from pathlib import Path
from typing import List, Sequence, Union

from ..bilm import BiLM
from ..bilm.batching import MAX_WINDOW, windows

# windows embedded at a time, in batches of ``batch_size``: what is held besides the file
BATCHES_AT_ONCE = 4


def dump_layers(
    bilm: BiLM, sentences: Sequence[List[str]], output: Union[str, Path], *, batch_size: int = 64,
    max_window: int = MAX_WINDOW,
) -> int:
    """Write the layers of ``sentences`` to the HDF5 file ``output``.

    max_window (int): most tokens run through the biLM as one sentence; a longer one is cut into
        windows whose layers fill its dataset in order.
    RETURNS (int): the sentences written.
    """
    import h5py

    pieces = [(i, begin, end) for i, sentence in enumerate(sentences) for begin, end in windows(0, len(sentence), max_window)]
    shape = (bilm.config.n_output_layers, bilm.config.output_dim)
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    with h5py.File(output, "w") as handle:
        datasets = [handle.create_dataset(str(i), shape=(shape[0], len(s), shape[1]), dtype="float32")
                    for i, s in enumerate(sentences)]
        step = batch_size * BATCHES_AT_ONCE
        for first in range(0, len(pieces), step):
            group = pieces[first : first + step]
            layers = bilm.embed([sentences[i][begin:end] for i, begin, end in group], batch_size=batch_size)
            for (i, begin, end), array in zip(group, layers):
                datasets[i][:, begin:end] = array
    return len(sentences)
