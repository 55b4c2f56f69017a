"""Imports go downward only (docs/ARCHITECTURE.md): the lower layers never import the upper ones."""
import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "spacy_elmo"
# top-level helper modules any layer but the plain model may use; they import no layer themselves
HELPERS = {"atomic", "cache_dir", "machine", "provenance", "plotting", "record_check"}
# layer -> the spacy_elmo modules and packages its code may import (besides its own)
ALLOWED = {
    "bilm": set(),
    "fast": {"bilm"} | HELPERS,
    "io": {"bilm", "fast"} | HELPERS,
    "probes": {"bilm", "fast", "io"} | HELPERS,
    "layers": {"bilm", "fast", "data_classes"} | HELPERS,
    "training": {"bilm", "fast", "io", "probes"} | HELPERS,
}
# the spaCy component's top-level modules (embed_corpus runs the component on Ray actors)
COMPONENT = {"pipeline", "initial_weights", "extensions", "architectures", "threads", "embed_corpus"}


def _imported(path: Path, root: Path = PACKAGE):
    """The spacy_elmo top-level names a module imports (relative imports resolved)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    depth = len(path.relative_to(root).parts) - 1  # packages between spacy_elmo and the module
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level == 0:
                parts = (node.module or "").split(".")
                if parts[0] == "spacy_elmo" and len(parts) > 1:
                    yield parts[1]
            elif node.level > depth:  # reaches above its own top-level package
                target = (node.module or "").split(".")[0]
                yield target if target else None
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "spacy_elmo" and len(parts) > 1:
                    yield parts[1]


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_layer_imports_only_downward(layer):
    wrong = set()
    for path in (PACKAGE / layer).rglob("*.py"):
        for name in _imported(path):
            if name is not None and name != layer and name not in ALLOWED[layer]:
                wrong.add(f"{path.relative_to(PACKAGE)} imports spacy_elmo.{name}")
    assert not wrong, sorted(wrong)


@pytest.mark.parametrize("module", sorted(COMPONENT))
def test_the_component_modules_import_only_the_layers_below(module):
    below = COMPONENT | {"layers", "io", "fast", "bilm", "data_classes"} | HELPERS
    assert set(_imported(PACKAGE / f"{module}.py")) <= below


@pytest.mark.parametrize("helper", ["atomic", "cache_dir"])
def test_the_file_helpers_import_nothing_of_the_package(helper):
    assert not list(_imported(PACKAGE / f"{helper}.py"))


def test_the_check_sees_an_upward_import(tmp_path):
    fake = tmp_path / "spacy_elmo" / "bilm"
    fake.mkdir(parents=True)
    (fake / "model.py").write_text(
        "from ..pipeline import Elmo\nfrom .lstm import X\nfrom spacy_elmo.training import loop\n", encoding="utf-8"
    )
    assert list(_imported(fake / "model.py", tmp_path / "spacy_elmo")) == ["pipeline", "training"]


def test_the_reference_model_imports_no_speed_code():
    """bilm/ is the plain model: nothing in it imports spacy_elmo.fast, at any depth."""
    for path in (PACKAGE / "bilm").rglob("*.py"):
        assert "fast" not in set(_imported(path)), path
    assert not list((PACKAGE / "bilm").glob("inference/*.py"))
