"""Every biLM layer of every sentence to HDF5, as bilm-tf's ``dump_bilm_embeddings`` writes them:
dataset "i" holds sentence i's layers, shape (L+1, n_tokens, width).

A sentence longer than ``max_window`` tokens runs in consecutive windows, as the elmo component runs
it (``bilm.batching.windows``), and its dataset is written window by window: memory stays that of a
few batches of windows whatever the length of a line (a 5 MB line run whole asked for 12.8 GB).

The file is written as ``OUTPUT.partial`` beside ``OUTPUT`` and renamed to ``OUTPUT`` only once every
sentence is in it, so an interrupted run never leaves a file that looks whole (and a file already at
``OUTPUT`` stays as it was until then). The partial file records which input and weights it holds
and how many sentences are complete; the same command run again continues from there, and a
partial file of another input, weights or window is started over, with a note saying so.
"""
import hashlib
import json
import os
from pathlib import Path
from typing import Any, Callable, List, Optional, Sequence, Union

from ..bilm import BiLM
from ..bilm.batching import MAX_WINDOW, windows
from .native import bilm_to_bytes

# windows embedded at a time, in batches of ``batch_size``: what is held besides the file
BATCHES_AT_ONCE = 4
PARTIAL = ".partial"
# the partial file's root attributes: what it was made from, and the sentences complete in it
MADE_FROM = "spacy_elmo_dump_made_from"
DONE = "spacy_elmo_dump_sentences_done"

# progress(sentences complete, tokens complete); the first call gives where a resumed run starts
Progress = Callable[[int, int], None]
# note(line): what became of a partial file found beside the output
Note = Callable[[str], None]


def partial_path(output: Union[str, Path]) -> Path:
    """Where ``dump_layers`` writes ``output`` until it is complete."""
    output = Path(output)
    return output.with_name(output.name + PARTIAL)


def dump_layers(
    bilm: BiLM, sentences: Sequence[List[str]], output: Union[str, Path], *, batch_size: int = 64,
    max_window: int = MAX_WINDOW, progress: Optional[Progress] = None, note: Optional[Note] = None,
) -> int:
    """Write the layers of ``sentences`` to the HDF5 file ``output`` (through ``partial_path(output)``).

    max_window (int): most tokens run through the biLM as one sentence; a longer one is cut into
        windows whose layers fill its dataset in order.
    progress (Optional[Progress]): told the sentences and tokens complete, first where the run
        starts (0, or what a partial file already holds), then after each group of windows.
    note (Optional[Note]): told what became of a partial file found beside ``output``.
    RETURNS (int): the sentences written.
    """
    import h5py

    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    partial = partial_path(output)
    made_from = json.dumps({"sentences": _sentences_sha256(sentences), "n_sentences": len(sentences),
                            "weights": hashlib.sha256(bilm_to_bytes(bilm)).hexdigest(), "max_window": max_window},
                           sort_keys=True)
    done = _resumable(partial, made_from, note or (lambda line: None))
    width = (bilm.config.n_output_layers, bilm.config.output_dim)
    with h5py.File(partial, "a" if done else "w") as handle:
        handle.attrs[MADE_FROM] = made_from
        for stale in [key for key in handle if int(key) >= done]:  # a sentence begun and not finished
            del handle[stale]
        handle.attrs[DONE] = done
        _write(handle, bilm, sentences, done, width, batch_size, max_window, progress or (lambda s, t: None))
        for key in (MADE_FROM, DONE):
            del handle.attrs[key]
    os.replace(partial, output)
    return len(sentences)


def _write(handle: Any, bilm: BiLM, sentences: Sequence[List[str]], done: int, width: tuple, batch_size: int,
           max_window: int, progress: Progress) -> None:
    """Sentences from ``done`` on, their datasets made in order as their first window arrives; after
    each group of windows the file is flushed with the count of sentences complete."""
    tokens = sum(len(s) for s in sentences[:done])
    progress(done, tokens)
    pieces = [(i, begin, end) for i in range(done, len(sentences)) for begin, end in windows(0, len(sentences[i]), max_window)]
    made = done

    def make_through(last: int) -> None:
        nonlocal made
        for i in range(made, last + 1):
            handle.create_dataset(str(i), shape=(width[0], len(sentences[i]), width[1]), dtype="float32")
        made = max(made, last + 1)

    step = batch_size * BATCHES_AT_ONCE
    for first in range(0, len(pieces), step):
        group = pieces[first : first + step]
        layers = bilm.embed([sentences[i][begin:end] for i, begin, end in group], batch_size=batch_size)
        for (i, begin, end), array in zip(group, layers):
            make_through(i)
            handle[str(i)][:, begin:end] = array
            tokens += end - begin
        last, _, end = group[-1]
        complete = last + 1 if end == len(sentences[last]) else last
        make_through(complete - 1)  # empty sentences before the next one with tokens are complete too
        handle.attrs[DONE] = complete
        handle.flush()
        progress(int(handle.attrs[DONE]), tokens)
    make_through(len(sentences) - 1)
    handle.attrs[DONE] = len(sentences)
    progress(len(sentences), tokens)


def _resumable(partial: Path, made_from: str, note: Note) -> int:
    """The sentences complete in a partial file made from the same input, weights and window (0 where
    there is none, or it was made from others, or it cannot be read: then it is started over)."""
    if not partial.exists():
        return 0
    import h5py

    try:
        with h5py.File(partial, "r") as handle:
            theirs, done = handle.attrs.get(MADE_FROM), int(handle.attrs.get(DONE, 0))
    except (OSError, ValueError, TypeError) as err:
        note(f"{partial} cannot be read ({err}); starting over")
        return 0
    if theirs != made_from:
        note(f"{partial} was written from another input, weights or window; starting over")
        return 0
    note(f"{partial} holds {done:,} complete sentences of this input and weights; continuing from there")
    return done


def _sentences_sha256(sentences: Sequence[List[str]]) -> str:
    digest = hashlib.sha256()
    for sentence in sentences:
        digest.update("\x1f".join(sentence).encode("utf-8", "surrogatepass") + b"\x1e")
    return digest.hexdigest()
