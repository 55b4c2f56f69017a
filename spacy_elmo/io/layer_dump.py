"""Every biLM layer of every sentence to HDF5, as bilm-tf's ``dump_bilm_embeddings`` writes them:
dataset "i" holds sentence i's layers, shape (L+1, n_tokens, width)."""
from pathlib import Path
from typing import List, Sequence, Union

from ..bilm import BiLM


def dump_layers(bilm: BiLM, sentences: Sequence[List[str]], output: Union[str, Path], *, batch_size: int = 64) -> int:
    """Write the layers of ``sentences`` to the HDF5 file ``output``.

    RETURNS (int): the sentences written.
    """
    import h5py

    vectors = bilm.embed(list(sentences), batch_size=batch_size)
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    with h5py.File(output, "w") as handle:
        for i, layers in enumerate(vectors):
            handle.create_dataset(str(i), data=layers)
    return len(vectors)
