"""Word sense data: the Senseval lexical samples, a plain format for others, and the seeded split.

Two formats are read:

- Senseval XML as NLTK packages it (``senseval.zip``, or one ``*.pos`` file from it):
  ``<instance>`` elements with an ``<answer senseid=...>`` and a ``<context>`` of ``<wf>``
  tokens, the target wrapped in ``<head>``. The lexical item is the instance id's part
  before the first dot (``hard-a``).
- A plain tab-separated file, one use a line: ``word<TAB>sense<TAB>index<TAB>tokens``, where
  ``tokens`` is the sentence split on single spaces and ``index`` the 0-based position of the
  target in it; empty lines and lines starting with ``#`` are skipped. Example::

      bank	bank%river	4	we sat on the bank of the river
"""
import random
import xml.etree.ElementTree as ET
import zipfile
from dataclasses import dataclass
from typing import Dict, Iterator, List, Optional, Tuple

from .conllu import PathLike, require_file


@dataclass(frozen=True)
class SenseUse:
    """word (str): the lexical item. sense (str): its gold sense. tokens (Tuple[str, ...]): the context.
    position (int): index of the target in ``tokens``."""

    word: str
    sense: str
    tokens: Tuple[str, ...]
    position: int

    def window(self, size: int) -> "SenseUse":
        """The same use with at most ``size`` tokens kept on each side of the target."""
        start = max(self.position - size, 0)
        return SenseUse(self.word, self.sense, self.tokens[start : self.position + size + 1], self.position - start)


def read_sense_uses(path: PathLike) -> List[SenseUse]:
    """Sense-tagged uses from Senseval XML (a .zip of .pos files, or one file) or the plain format.

    RETURNS (List[SenseUse]): in file order.
    """
    path = require_file(path, "word-sense file")
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as archive:
            members = sorted(name for name in archive.namelist() if name.endswith(".pos"))
            if not members:
                raise ValueError(f"{path} is a zip file without Senseval .pos files")
            uses = [use for name in members for use in _senseval_uses(archive.read(name), f"{path}:{name}")]
    else:
        data = path.read_bytes()
        uses = list(_senseval_uses(data, str(path)) if data.lstrip().startswith(b"<") else _plain_uses(data, str(path)))
    if not uses:
        raise ValueError(f"{path} holds no sense-tagged uses")
    return uses


def _senseval_uses(data: bytes, source: str) -> Iterator[SenseUse]:
    try:
        root = ET.fromstring(data)
    except ET.ParseError as err:
        raise ValueError(f"{source}: not Senseval XML ({err})") from err
    for instance in root.iter("instance"):
        answer = instance.find("answer")
        context = instance.find("context")
        if answer is None or context is None or not answer.get("senseid"):
            raise ValueError(f"{source}: instance {instance.get('id')!r} lacks an <answer senseid=...> or a <context>")
        tokens: List[str] = []
        heads: List[int] = []
        _collect_words(context, tokens, heads, in_head=False)
        if len(heads) != 1:
            raise ValueError(f"{source}: instance {instance.get('id')!r} has {len(heads)} <head> words, not one")
        word = str(instance.get("id", "")).split(".")[0] or tokens[heads[0]]
        yield SenseUse(word, str(answer.get("senseid")), tuple(tokens), heads[0])


def _collect_words(element: ET.Element, tokens: List[str], heads: List[int], *, in_head: bool) -> None:
    for child in element:
        if child.tag == "wf" and (child.text or "").strip():
            if in_head:
                heads.append(len(tokens))
            tokens.append(child.text.strip())
        else:
            _collect_words(child, tokens, heads, in_head=in_head or child.tag == "head")


def _plain_uses(data: bytes, source: str) -> Iterator[SenseUse]:
    for number, line in enumerate(data.decode("utf-8").splitlines(), start=1):
        if not line.strip() or line.startswith("#"):
            continue
        columns = line.split("\t")
        if len(columns) != 4 or not columns[2].strip().isdigit():
            raise ValueError(f"{source}:{number}: expected word<TAB>sense<TAB>index<TAB>tokens, got {line!r}")
        tokens = tuple(columns[3].split())
        position = int(columns[2])
        if position >= len(tokens):
            raise ValueError(
                f"{source}:{number}: the target {columns[0]!r} has no token at index {position} "
                f"(the sentence has {len(tokens)} tokens)"
            )
        yield SenseUse(columns[0], columns[1], tokens, position)


def split_uses(
    uses: List[SenseUse], *, seed: int, test_share: float = 0.2, max_per_word: Optional[int] = None
) -> Tuple[List[SenseUse], List[SenseUse]]:
    """A seeded split of each word's uses into train and test (after an optional seeded cap per word).

    RETURNS (Tuple[List[SenseUse], List[SenseUse]]): (train, test), each in input order.
    """
    by_word: Dict[str, List[int]] = {}
    for index, use in enumerate(uses):
        by_word.setdefault(use.word, []).append(index)
    train, test = set(), set()
    for word, indices in sorted(by_word.items()):
        random.Random(f"{seed}:{word}").shuffle(indices)
        indices = indices[:max_per_word] if max_per_word else indices
        n_test = max(int(round(test_share * len(indices))), 1) if len(indices) > 1 else 0
        test.update(indices[:n_test])
        train.update(indices[n_test:])
    return [u for i, u in enumerate(uses) if i in train], [u for i, u in enumerate(uses) if i in test]
