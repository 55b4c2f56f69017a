"""Reading token-level labels: UPOS from a CoNLL-U file."""
from pathlib import Path
from typing import List, Tuple, Union

PathLike = Union[str, Path]
# One sentence: its tokens and one label per token.
Tagged = Tuple[Tuple[str, ...], Tuple[str, ...]]


def require_file(path: PathLike, what: str) -> Path:
    """RETURNS (Path): ``path``, after checking that it is a non-empty file (an error says which and why)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{what} {path} not found")
    if path.stat().st_size == 0:
        raise ValueError(f"{what} {path} is empty")
    return path


def read_conllu(path: PathLike) -> List[Tagged]:
    """Syntactic words and their UPOS tags, sentence by sentence.

    Multiword-token ranges (``1-2``) and empty nodes (``1.1``) are skipped, so the tokens are
    the words the treebank tags (``don't`` is ``do`` + ``n't``).

    path (PathLike): a .conllu file.
    RETURNS (List[Tagged]): (tokens, tags) per sentence, in file order.
    """
    path = require_file(path, "CoNLL-U file")
    sentences: List[Tagged] = []
    words: List[str] = []
    tags: List[str] = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            line = line.rstrip("\n")
            if not line.strip():
                if words:
                    sentences.append((tuple(words), tuple(tags)))
                    words, tags = [], []
                continue
            if line.startswith("#"):
                continue
            columns = line.split("\t")
            if len(columns) < 4:
                raise ValueError(f"{path}:{number}: not a CoNLL-U line (ID, FORM, LEMMA, UPOS, ... separated by tabs)")
            if columns[0].isdigit():
                words.append(columns[1])
                tags.append(columns[3])
    if words:
        sentences.append((tuple(words), tuple(tags)))
    if not sentences:
        raise ValueError(f"{path} holds no CoNLL-U sentences")
    return sentences
