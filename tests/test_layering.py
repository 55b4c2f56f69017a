"""Imports go downward only (docs/ARCHITECTURE.md): the lower layers never import the upper ones; every
module of the package is reached from what a user calls; the lab, the benchmarks and the tests are
imported as packages, never loaded by file path."""
import ast
import configparser
import re
from fnmatch import fnmatchcase
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "spacy_elmo"
# the one top-level helper module any layer but the plain model may use; it imports no layer itself
HELPERS = {"files"}
# layer -> the spacy_elmo modules and packages its code may import (besides its own); None is the
# package itself (``from .. import __version__``)
ALLOWED = {
    "bilm": set(),
    "fast": {"bilm"} | HELPERS,
    "io": {"bilm", "fast"} | HELPERS,
    # the run record finds a model as the loader does, so it sits above io/ (and names the kernels' variant)
    "records": {"io", "fast", None} | HELPERS,
    "layers": {"bilm", "fast", "data_classes"} | HELPERS,
    "probes": {"bilm", "fast", "io", "records"} | HELPERS,
    # word usages, substitutes, semantic change, senses: apart from the layer probes
    "usage": {"bilm", "io"} | HELPERS,
    "training": {"bilm", "fast", "io", "probes", "usage", "records"} | HELPERS,
    # the downstream experiment trains spaCy pipelines (the component comes through spaCy's registry)
    "downstream": {"records"} | HELPERS,
    # corpus embedding runs the spaCy component on Ray actors or Spark tasks
    "embed": {"pipeline", "layers", "io", "fast", "bilm"} | HELPERS,
    # exported files of the reference biLM, and a pipeline served over HTTP
    "export": {"bilm", "fast", "io", "records"} | HELPERS,
    # the installed training configs, headed by what a named biLM's size means for them
    "configs": {"bilm", "io", "layers"} | HELPERS,
}
# the spaCy component's top-level modules
COMPONENT = {"pipeline", "initial_weights", "extensions", "architectures", "threads", "v1_settings"}
# the package root: the component, its architectures, the package's face and the file helpers
ROOT_MODULES_AT_MOST = 10


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


@pytest.mark.parametrize("helper", sorted(HELPERS))
def test_the_helpers_import_nothing_of_the_package(helper):
    assert not list(_imported(PACKAGE / f"{helper}.py"))


def test_the_package_root_holds_at_most_ten_modules():
    """The component, its architectures and the package's face; every other concern has a folder."""
    modules = sorted(path.name for path in PACKAGE.glob("*.py"))
    assert len(modules) <= ROOT_MODULES_AT_MOST, modules
    assert set(modules) <= {f"{name}.py" for name in COMPONENT | HELPERS | {"__init__", "__main__", "data_classes"}}


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


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(path): path for path in PACKAGE.rglob("*.py")}


def _imports_of(name: str):
    """Each import statement of module ``name``, at any depth of its code: (the module it imports
    from, absolute, or None for ``import a.b``; the names it imports)."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            yield None, [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            yield base, [alias.name for alias in node.names]


def _imported_modules(name: str) -> set:
    """The spacy_elmo modules that module ``name`` imports (packages whose __init__ runs included)."""
    found = set()
    for base, names in _imports_of(name):
        # `from . import x`: a module
        targets = names if base is None else [base] + [f"{base}.{n}" for n in names]
        for target in targets:
            parts = target.split(".")
            found |= {".".join(parts[:i]) for i in range(1, len(parts) + 1)} & set(MODULES)
    return found


def _entry_points() -> set:
    """What a user calls: the package, ``python -m spacy_elmo`` and setup.cfg's entry points."""
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg", encoding="utf-8")
    roots = {"spacy_elmo", "spacy_elmo.__main__"}
    for group in config["options.entry_points"].values():
        roots |= {line.split("=", 1)[1].strip().split(":")[0] for line in group.strip().splitlines()}
    return roots


def test_every_module_of_the_package_is_reached_from_what_a_user_calls():
    """No module of spacy_elmo/ is there only for the tests, the benchmarks or the lab."""
    reached, todo = set(), list(_entry_points())
    while todo:
        name = todo.pop()
        if name not in reached:
            reached.add(name)
            todo += _imported_modules(name) - reached
    assert set(MODULES) - reached == set(), "imported by nothing a user calls"


def test_the_graph_follows_relative_lazy_and_submodule_imports():
    # ``from ..files import file_sha256`` at the top, ``from ..io.loading import ...`` in a function
    assert {"spacy_elmo", "spacy_elmo.io", "spacy_elmo.files", "spacy_elmo.io.loading", "spacy_elmo.records.machine"} <= (
        _imported_modules("spacy_elmo.records.provenance"))
    assert {"spacy_elmo.pipeline", "spacy_elmo.cli.main", "spacy_elmo.cli.spacy_plugin"} <= _entry_points()


def test_the_package_imports_nothing_of_the_lab_the_benchmarks_or_the_tests():
    for path in PACKAGE.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""] if (
                isinstance(node, ast.ImportFrom) and node.level == 0) else []
            assert not {n.split(".")[0] for n in names} & {"lab", "bench", "scripts", "tests"}, path


def test_the_wheel_holds_the_package_and_not_the_lab():
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg", encoding="utf-8")
    include = config["options.packages.find"]["include"].split()

    def packaged(name: str) -> bool:  # setuptools' find_packages matches dotted names so
        return any(fnmatchcase(name, pattern) for pattern in include)

    assert packaged("spacy_elmo") and packaged("spacy_elmo.fast")
    assert not [name for name in ("lab", "lab.records", "bench", "tests", "tests.lab", "scripts") if packaged(name)]


# loading code by file path: importlib's spec from a file, runpy's path runner, the import path edited
BY_PATH = re.compile(r"spec_from_file_location|SourceFileLoader|run_path\(|sys\.path\.(insert|append)|sys\.path\s*\+?=")


# setup.py is a script that no import reaches, not a module of the package or the lab
RUNS_A_SCRIPT = {"tests/test_setup.py"}


def test_no_test_or_benchmark_loads_code_by_file_path():
    here = Path(__file__).name
    files = [p for folder in ("tests", "bench", "lab", "scripts") for p in (ROOT / folder).rglob("*.py") if p.name != here]
    loading = [p.relative_to(ROOT).as_posix() for p in files if BY_PATH.search(p.read_text(encoding="utf-8"))]
    assert sorted(set(loading) - RUNS_A_SCRIPT) == []


def test_the_map_names_every_module_of_the_package_and_the_lab():
    """docs/ARCHITECTURE.md leads to every module in one hop: its path below the package (``io/native.py``)
    or, inside a package's own section, its file name."""
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    unnamed = []
    for top in ("spacy_elmo", "lab"):
        for path in sorted((ROOT / top).rglob("*.py")):
            below = path.relative_to(ROOT / top)
            if path.name == "__init__.py" or path.name == "__main__.py":
                continue
            named = re.search(rf"[`/ (]{re.escape(below.as_posix())}\b", text) or (
                len(below.parts) > 1 and f"`{path.name}`" in text)
            if not named:
                unnamed.append(f"{top}/{below.as_posix()}")
    assert unnamed == []


def _named_modules(name: str) -> set:
    """The spacy_elmo modules that module ``name`` names in its imports, at any depth of its code
    (function-level imports too): ``from .x import y`` names ``x`` (and ``x.y`` where that is a
    module), not the packages above ``x``, whose ``__init__`` only runs first."""
    named = set()
    for base, names in _imports_of(name):
        targets = names if base is None else [f"{base}.{n}" if f"{base}.{n}" in MODULES else base for n in names]
        named |= {target for target in targets if target in MODULES and target != name}
    return named


def _circles(graph: dict) -> list:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index, low, stack, on_stack, circles, counter = {}, {}, [], set(), [], [0]
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter[0]
                    counter[0] += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    circles.append(sorted(component))
    return circles


def test_no_module_of_the_package_imports_itself_through_others():
    """No import circle, function-level imports included: a lazy import that closes a circle hides
    a module in the wrong place."""
    assert _circles({name: _named_modules(name) for name in MODULES}) == []


def test_the_circle_check_finds_a_lazy_circle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _circles(graph) == [["a", "b", "c"]]
