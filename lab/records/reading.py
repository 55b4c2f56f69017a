"""The records a generated block reads: ``lab.records.numbers``'s tables read each JSON record
through ``read_record``, which notes its path, so that ``lab.records.binding`` holds every record
behind a generated number to the same standing as a record a number names."""
import json
from pathlib import Path
from typing import Any, Set

# the checkout-relative paths read since the last ``READ.clear()``
READ: Set[str] = set()


def read_record(root: Path, path: str) -> Any:
    """RETURNS (Any): the JSON of a record, relative to the checkout ``root``; its path joins ``READ``."""
    READ.add(path)
    return json.loads((root / path).read_text(encoding="utf-8"))
