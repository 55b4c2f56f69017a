"""The docs' code examples, run as a reader runs them: every ```python block of the README, docs/*.md
and the model cards, each alone in a fresh namespace, and every ``python -m spacy_elmo COMMAND --flag``
of their ```bash blocks against that command's parser.

A block's comments speak to the reader and to this test:

- ``# needs the network: ...`` as its first line: a download or a cluster; not run here, counted;
- ``# NAME, NAME: your ...``: the files named are the reader's own; the test puts a small stand-in
  of each in the block's working folder (``STAND_INS``);
- ``# (3, 7, 256) ...`` after an expression: the shape of its value (an array's ``.shape``, or the
  tuple itself); numbers are asserted, names (``n_uses``) stand for any size;
- ``# serves until stopped``: the block's last statement, which never returns; the ones before it run.
"""
import ast
import io
import re
import shlex
import tokenize
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Set, Tuple

import pytest
import typer

from spacy_elmo.cli import app

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")),
             *sorted((ROOT / "spacy_elmo" / "models").glob("*/MODEL_CARD.md"))]
TINY = ROOT / "tests" / "data" / "allennlp" / "tiny"
NEEDS_THE_NETWORK = "# needs the network:"
SERVES_UNTIL_STOPPED = "# serves until stopped"
# the blocks that download a published model (by name or from the Hugging Face Hub) or read a cluster's storage
EXPECTED_NETWORK_BLOCKS = 4
PLACEHOLDER = re.compile(r"#\s*([\w./-]+(?:,\s*[\w./-]+)*):\s*your\b")
SHAPE = re.compile(r"#\s*\(([\w\s,]*)\)")
# extras a block may need; without one installed, the block is skipped and says which
OPTIONAL_MODULES = {"onnx", "onnxruntime", "fastapi", "uvicorn", "httpx", "pyspark", "sklearn", "scipy", "ray"}


@dataclass(frozen=True)
class Block:
    """A fenced code block: the document, its opening line (from 1), its language and its code."""

    document: Path
    line: int
    language: str
    code: str

    def __str__(self) -> str:
        return f"{self.document.relative_to(ROOT)}:{self.line}"

    @property
    def needs_the_network(self) -> bool:
        return self.code.lstrip().startswith(NEEDS_THE_NETWORK)

    @property
    def placeholders(self) -> List[str]:
        return [name.strip() for found in PLACEHOLDER.finditer(self.code) for name in found.group(1).split(",")]


def fenced_blocks(document: Path) -> Iterator[Block]:
    lines = document.read_text(encoding="utf-8").split("\n")
    opening: Optional[Tuple[int, str, str]] = None
    for number, line in enumerate(lines, 1):
        fence = re.match(r"^(\s*)```(\S*)", line)
        if fence is None:
            continue
        if opening is None:
            opening = (number, fence.group(1), fence.group(2))
        else:
            start, indent, language = opening
            body = [text[len(indent):] if text.startswith(indent) else text for text in lines[start : number - 1]]
            yield Block(document, start, language, "\n".join(body) + "\n")
            opening = None


BLOCKS = [block for document in DOCUMENTS for block in fenced_blocks(document)]
PYTHON = [block for block in BLOCKS if block.language == "python"]
BASH = [block for block in BLOCKS if block.language in ("bash", "sh", "shell")]


# --- the stand-ins: each made once for the module, linked into every block folder that names it


def _corpus(folder: Path) -> Path:
    path = folder / "corpus.txt"
    lines = ["We sat on the bank of the river .", "The bank raised its rates again .",
             "The children play in the park .", "They saw a play at the theatre .",
             "She walked along the bank at dawn .", "He opened an account at the bank ."]
    path.write_text("\n".join(lines * 3) + "\n", encoding="utf-8")
    return path


def _tiny_pair_file(name: str) -> Callable[[Path], Path]:
    return lambda folder: TINY / name


def _model_folder(folder: Path) -> Path:
    """A folder holding a published pair: what ``training/model-best`` stands for."""
    model = folder / "model-best"
    model.mkdir()
    for name in ("options.json", "weights.hdf5"):
        (model / name).symlink_to(TINY / name)
    return model


def _probe_data(folder: Path) -> Path:
    """assets/datasets with a few UPOS sentences and WiC pairs, in the published files' layouts."""
    datasets = folder / "datasets"
    ewt = datasets / "ud_english_ewt"
    ewt.mkdir(parents=True)
    tagged = [("the bank raised rates .", "DET NOUN VERB NOUN PUNCT"), ("we sat on the bank .", "PRON VERB ADP DET NOUN PUNCT"),
              ("children play in parks .", "NOUN VERB ADP NOUN PUNCT"), ("a play opened .", "DET NOUN VERB PUNCT")]
    for split, repeat in (("train", 6), ("dev", 2)):
        sentences = []
        for i, (words, tags) in enumerate(tagged * repeat):
            rows = [f"{k}\t{w}\t{w}\t{t}\t_\t_\t0\tdep\t_\t_" for k, (w, t) in enumerate(zip(words.split(), tags.split()), 1)]
            sentences.append("\n".join([f"# sent_id = {split}-{i}", *rows]) + "\n")
        (ewt / f"en_ewt-ud-{split}.conllu").write_text("\n".join(sentences), encoding="utf-8")
    pairs = [("play", "V", "1-1", "we play chess", "they play music", "T"),
             ("bank", "N", "1-3", "the bank closed", "we sat on the bank", "F")]
    for split, repeat in (("train", 8), ("test", 4)):
        wic = datasets / "wic" / split
        wic.mkdir(parents=True)
        (wic / f"{split}.data.txt").write_text(
            "".join("\t".join(pair[:5]) + "\n" for pair in pairs * repeat), encoding="utf-8")
        (wic / f"{split}.gold.txt").write_text("".join(pair[5] + "\n" for pair in pairs * repeat), encoding="utf-8")
    return datasets


def _export(fmt: str) -> Callable[[Path], Path]:
    def make(folder: Path) -> Path:
        from spacy_elmo.export import export_model

        output = folder / ("en_small.onnx" if fmt == "onnx" else "en_small.pt")
        export_model(None, output, fmt)
        return output

    return make


def _pipeline(folder: Path) -> Path:
    """A saved pipeline with the shipped biLM: what a packaged ``en_elmo`` stands for."""
    import spacy

    nlp = spacy.blank("en")
    nlp.add_pipe("elmo")
    nlp.initialize()
    nlp.to_disk(folder / "en_elmo")
    return folder / "en_elmo"


def _embedded(folder: Path) -> Path:
    """A finished embed-corpus output folder of a few lines, every layer of the tiny biLM."""
    from ..embedded_folder import embed_here

    (folder / "corpus").mkdir()
    (folder / "corpus" / "corpus.txt").write_text("the bank of the river\nthe bank lends money\n", encoding="utf-8")
    embed_here(folder / "corpus", folder / "embeddings", TINY)
    return folder / "embeddings"


# the reader's files the docs name, and how the test stands in for each
STAND_INS: Dict[str, Callable[[Path], Path]] = {
    "embeddings": _embedded,
    "options.json": _tiny_pair_file("options.json"),
    "weights.hdf5": _tiny_pair_file("weights.hdf5"),
    "corpus.txt": _corpus,
    "training/model-best": _model_folder,
    "assets/datasets": _probe_data,
    "en_small.onnx": _export("onnx"),
    "en_small.pt": _export("torchscript"),
    "en_elmo": _pipeline,
}


class StandIns:
    """The stand-ins, each made on first use in a folder of its own, and linked with the files
    written beside it into a block's working folder."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.made: Dict[str, Path] = {}

    def link(self, name: str, into: Path) -> None:
        if name not in self.made:
            place = self.folder / name.replace("/", "_")
            place.mkdir()
            self.made[name] = STAND_INS[name](place)
        made = self.made[name]
        target = into / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.symlink_to(made)
        for beside in made.parent.glob(f"{made.name}.*"):  # an export's record (FILE.json) comes with it
            (target.parent / beside.name).symlink_to(beside)


@pytest.fixture(scope="module")
def stand_ins(tmp_path_factory):
    return StandIns(tmp_path_factory.mktemp("stand-ins"))


# --- running a block


def _comments(code: str) -> Dict[int, str]:
    """The comment of each line of ``code`` (line numbers from 1)."""
    tokens = tokenize.generate_tokens(io.StringIO(code).readline)
    return {token.start[0]: token.string for token in tokens if token.type == tokenize.COMMENT}


def _stated_shape(comment: str) -> Optional[List[Optional[int]]]:
    """The shape a comment states, ``None`` for a dimension it names; None: it states none."""
    found = SHAPE.match(comment)
    if found is None:
        return None
    dims = [d.strip() for d in found.group(1).split(",") if d.strip()]
    if not dims or not all(re.fullmatch(r"\d+|[A-Za-z_]\w*", d) for d in dims):
        return None
    return [int(d) if d.isdigit() else None for d in dims]


def _shape_of(value: Any) -> Tuple[int, ...]:
    if isinstance(value, tuple) and all(isinstance(d, int) for d in value):
        return tuple(value)
    return tuple(value.shape)


def run_block(block: Block) -> Dict[str, Any]:
    """Run a block's statements in order in a fresh namespace, asserting the shapes its comments
    state; RETURNS the namespace."""
    tree = ast.parse(block.code, filename=str(block))
    comments = _comments(block.code)
    namespace: Dict[str, Any] = {"__name__": "__docs__"}
    for index, statement in enumerate(tree.body):
        said = " ".join(comments.get(n, "") for n in range(statement.lineno, statement.end_lineno + 1))
        if SERVES_UNTIL_STOPPED in said:
            assert index == len(tree.body) - 1, f"{block}: a statement that serves until stopped must come last"
            return namespace
        where = f"{block} (line {block.line + statement.lineno})"
        if isinstance(statement, ast.Expr):
            value = eval(compile(ast.Expression(statement.value), where, "eval"), namespace)
            stated = _stated_shape(comments.get(statement.lineno, ""))
            if stated is not None:
                shape = _shape_of(value)
                assert len(shape) == len(stated) and all(s is None or s == d for s, d in zip(stated, shape)), (
                    f"{where}: the comment states {comments[statement.lineno]!r}, the value's shape is {shape}")
        else:
            exec(compile(ast.Module([statement], type_ignores=[]), where, "exec"), namespace)
    return namespace


def test_the_documents_hold_python_and_bash_blocks_to_check():
    assert len(PYTHON) >= 15 and len(BASH) >= 40
    assert all(block.code.strip() for block in PYTHON)


def test_the_blocks_that_need_the_network_are_marked_and_counted():
    marked = [block for block in PYTHON if block.needs_the_network]
    assert len(marked) == EXPECTED_NETWORK_BLOCKS, [str(b) for b in marked]
    for block in marked:
        assert "load_bilm(\"" in block.code or "hdfs://" in block.code, f"{block} is marked but reads nothing remote"


def test_every_placeholder_file_has_a_stand_in():
    named = {name for block in PYTHON for name in block.placeholders}
    assert named <= set(STAND_INS), named - set(STAND_INS)


@pytest.mark.parametrize("block", [b for b in PYTHON if not b.needs_the_network], ids=str)
def test_the_docs_python_block_runs_as_it_stands(block, stand_ins, tmp_path, monkeypatch):
    for name in block.placeholders:
        stand_ins.link(name, tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SPACY_ELMO_DATA", raising=False)
    try:
        run_block(block)
    except ModuleNotFoundError as err:
        if err.name is None or err.name.split(".")[0] not in OPTIONAL_MODULES:
            raise
        pytest.skip(f"{block} needs {err.name}, an optional extra not installed here")


# --- the bash blocks' flags


def _commands() -> Dict[str, Any]:
    """The package's commands by name, as the command line builds them."""
    return dict(typer.main.get_command(app).commands)


def _flags(command: Any) -> Set[str]:
    flags = {"--help"}
    for param in command.params:
        flags.update(opt for opt in [*param.opts, *param.secondary_opts] if opt.startswith("--"))
    return flags


def package_command_lines(block: Block) -> Iterator[List[str]]:
    """The words of each ``python -m spacy_elmo ...`` command line in a bash block, comments dropped."""
    for line in block.code.replace("\\\n", " ").split("\n"):
        words = shlex.split(line, comments=True)
        for start in range(len(words) - 2):
            if words[start].endswith("python") and words[start + 1 : start + 3] == ["-m", "spacy_elmo"]:
                yield words[start + 3 :]


def test_the_bash_blocks_run_package_commands():
    assert sum(len(list(package_command_lines(block))) for block in BASH) >= 40


@pytest.mark.parametrize("block", [b for b in BASH if list(package_command_lines(b))], ids=str)
def test_every_flag_of_a_package_command_in_the_docs_is_in_its_parser(block):
    commands = _commands()
    for words in package_command_lines(block):
        assert words and words[0] in commands, f"{block}: no command {words[:1]} (commands: {sorted(commands)})"
        command = commands[words[0]]
        flags = _flags(command)
        takes_overrides = command.context_settings.get("allow_extra_args", False)
        for word in words[1:]:
            if word.startswith("--"):
                flag = word.split("=", 1)[0]
                if "." in flag:  # a config override, --section.key, where the command reads a config
                    assert takes_overrides, f"{block}: `{words[0]}` takes no config overrides such as {flag}"
                else:
                    assert flag in flags, f"{block}: `{words[0]}` has no {flag} (its flags: {sorted(flags)})"
