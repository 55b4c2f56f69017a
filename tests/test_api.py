"""The supported API: every face of the package (``spacy_elmo`` and each subpackage's ``__init__``)
declares ``__all__``, and docs/api.md lists exactly those names, each with a line, under the face
that exports it. Everything else is internal."""
import importlib
import pkgutil
import re
from pathlib import Path

import pytest

import spacy_elmo

ROOT = Path(__file__).resolve().parent.parent
API = ROOT / "docs" / "api.md"
FACES = ["spacy_elmo"] + sorted(
    info.name for info in pkgutil.iter_modules(spacy_elmo.__path__, "spacy_elmo.") if info.ispkg and not info.name.endswith(".models")
)
ENTRY = re.compile(r"^- `([A-Za-z_][A-Za-z0-9_]*)`(?:\([^)]*\))?: \S")


def _documented() -> dict:
    """face -> the names docs/api.md lists under ``## `face` ``."""
    found, face = {}, None
    for line in API.read_text(encoding="utf-8").splitlines():
        heading = re.match(r"^## `(spacy_elmo(?:\.[a-z_]+)*)`", line)
        if heading:
            face = heading.group(1)
            found.setdefault(face, [])
        elif face is not None and line.startswith("- `"):
            entry = ENTRY.match(line)
            assert entry, f"docs/api.md: an entry is '- `name`: what it is' ({line!r})"
            found[face].append(entry.group(1))
    return found


@pytest.mark.parametrize("face", FACES)
def test_every_face_declares_what_it_supports(face):
    module = importlib.import_module(face)
    assert isinstance(getattr(module, "__all__", None), list), f"{face} has no __all__"
    missing = [name for name in module.__all__ if not hasattr(module, name)]
    assert missing == [], f"{face}.__all__ names what it does not have"


@pytest.mark.parametrize("face", FACES)
def test_the_api_page_lists_exactly_each_faces_all(face):
    documented = _documented()
    assert face in documented, f"docs/api.md has no section for {face}"
    listed = documented[face]
    assert len(listed) == len(set(listed)), f"docs/api.md lists a name of {face} twice"
    assert sorted(listed) == sorted(importlib.import_module(face).__all__)


def test_the_api_page_names_no_face_that_does_not_exist():
    assert set(_documented()) <= set(FACES)
