"""The speed wing's shape: the kernel library below the loops that use it, and no precision worked out again from the user's word after ``choose_precision`` read it."""
import ast
from pathlib import Path
from typing import List, Set

import spacy_elmo.fast as fast

FAST = Path(fast.__file__).parent
WORDS = {"fp32", "bf16", "fp16", "int8"}
WORD_LISTS = {"PRECISIONS", "CPU_ONLY"}  # tuples of the words (precision.py)
READS_THE_WORD = ("precision.py", "choose_precision")  # the one place


def _imports(path: Path) -> Set[str]:
    """The fast/ modules that ``path`` imports, at any level of its code."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            names = [node.module] if node.module else [alias.name for alias in node.names]
            found.update(name.split(".")[0] for name in names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("spacy_elmo.fast."):
            found.add(node.module.split(".")[2])
        elif isinstance(node, ast.ImportFrom) and node.module == "spacy_elmo.fast":
            found.update(alias.name for alias in node.names)
    modules = {p.stem for p in FAST.glob("*.py")}
    return (found & modules) - {path.stem}


def test_the_kernel_library_is_below_the_loops_that_use_it():
    """Building and loading the kernels is its own module; the row kernels do not import the loop
    (tests/test_layering.py finds no import circle anywhere in the package)."""
    graph = {path.stem: _imports(path) for path in FAST.glob("*.py") if path.stem != "__init__"}
    assert graph["bf16_rows"] == {"kernel_library"} and "kernel_library" in graph["compiled"]
    assert not graph["kernel_library"] & {"compiled", "bf16_rows", "int8_rows", "in_place", "lockstep"}


def _word_comparisons(source: str) -> List[str]:
    """Where ``source`` compares something with a precision's word or a tuple of them (==, !=, in,
    ``startswith``/``endswith``), with the enclosing function: "function:line"."""
    found = []

    def words(node: ast.AST) -> bool:
        if isinstance(node, (ast.Name, ast.Attribute)) and getattr(node, "id", getattr(node, "attr", None)) in WORD_LISTS:
            return True
        parts = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
        return any(isinstance(p, ast.Constant) and p.value in WORDS for p in parts)

    def walk(node: ast.AST, function: str) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            function = node.name
        if isinstance(node, ast.Compare) and any(words(n) for n in (node.left, *node.comparators)):
            found.append(f"{function}:{node.lineno}")
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("startswith", "endswith") and any(words(a) for a in node.args)):
            found.append(f"{function}:{node.lineno}")
        for child in ast.iter_child_nodes(node):
            walk(child, function)

    walk(ast.parse(source), "<module>")
    return found


def test_no_precision_word_is_compared_outside_the_one_place_that_reads_it():
    found = {
        path.name: [where for where in _word_comparisons(path.read_text(encoding="utf-8"))
                    if (path.name, where.split(":")[0]) != READS_THE_WORD]
        for path in sorted(FAST.glob("*.py"))
    }
    assert {name: where for name, where in found.items() if where} == {}


def test_the_scan_sees_each_form_of_comparing_a_word():
    source = (
        "def f(p, path):\n"
        "    if p == 'bf16' or p in ('fp16', 'int8') or 'fp32' != p:\n"
        "        return path.endswith('int8') or p in precision.CPU_ONLY\n"
        "    return p.name\n"
    )
    assert _word_comparisons(source) == ["f:2", "f:2", "f:2", "f:3", "f:3"]
