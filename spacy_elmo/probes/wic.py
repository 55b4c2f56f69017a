"""Word-in-Context pairs (Pilehvar & Camacho-Collados, 2019).

A WiC split is ``NAME.data.txt`` (``word<TAB>PoS<TAB>i-j<TAB>sentence 1<TAB>sentence 2``, tokens
separated by spaces, ``i`` and ``j`` the 0-based positions of the word in each sentence) with
its labels in ``NAME.gold.txt`` beside it (``T`` or ``F`` a line). A data line may instead carry
its label as a sixth column. A directory stands for the one ``*.data.txt`` file in it.
"""
from dataclasses import dataclass
from pathlib import Path
from typing import List, Sequence, Tuple

from .conllu import PathLike, require_file


@dataclass(frozen=True)
class WicPair:
    """word (str): the target lemma. first, second (Tuple[str, ...]): the two sentences.
    positions (Tuple[int, int]): the target's index in each. same (bool): the same meaning in both."""

    word: str
    first: Tuple[str, ...]
    second: Tuple[str, ...]
    positions: Tuple[int, int]
    same: bool


def wic_data_file(path: PathLike) -> Path:
    """RETURNS (Path): the ``*.data.txt`` file ``path`` names (itself, or the one in a directory)."""
    path = Path(path)
    if path.is_dir():
        found = sorted(path.glob("*.data.txt"))
        if len(found) != 1:
            raise FileNotFoundError(f"{path}: expected one *.data.txt file in the directory, found {len(found)}")
        return found[0]
    return path


def read_wic(path: PathLike) -> List[WicPair]:
    """RETURNS (List[WicPair]): the pairs of a WiC split, in file order."""
    data = require_file(wic_data_file(path), "WiC data file")
    lines = [line for line in data.read_text(encoding="utf-8").splitlines() if line.strip()]
    labels: Sequence[str] = []
    if lines and len(lines[0].split("\t")) == 5:
        gold = data.with_name(data.name.replace(".data.txt", ".gold.txt"))
        if gold == data or not gold.is_file():
            raise FileNotFoundError(f"{data}: labels not found: expected {gold} beside it, or a sixth column")
        labels = [line.strip() for line in gold.read_text(encoding="utf-8").splitlines() if line.strip()]
        if len(labels) != len(lines):
            raise ValueError(f"{gold} has {len(labels)} labels for the {len(lines)} pairs of {data}")
    pairs = []
    for number, line in enumerate(lines, start=1):
        columns = line.split("\t")
        label = labels[number - 1] if labels else (columns[5].strip() if len(columns) == 6 else "")
        indices = columns[2].split("-") if len(columns) >= 5 else []
        if len(columns) not in (5, 6) or len(indices) != 2 or not all(i.isdigit() for i in indices) or label not in ("T", "F"):
            raise ValueError(f"{data}: pair {number}: expected word<TAB>PoS<TAB>i-j<TAB>sentence<TAB>sentence and a T/F label")
        first, second = tuple(columns[3].split()), tuple(columns[4].split())
        positions = (int(indices[0]), int(indices[1]))
        for sentence, position, which in ((first, positions[0], "first"), (second, positions[1], "second")):
            if position >= len(sentence):
                raise ValueError(
                    f"{data}: pair {number}: the word {columns[0]!r} is absent from its {which} sentence "
                    f"(index {position}, but the sentence has {len(sentence)} tokens)"
                )
        pairs.append(WicPair(columns[0], first, second, positions, label == "T"))
    if not pairs:
        raise ValueError(f"{data} holds no WiC pairs")
    return pairs

