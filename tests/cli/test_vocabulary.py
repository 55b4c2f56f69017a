"""The command line speaks one vocabulary (docs/commands.md), its help shows what its docs say, and
its commands parse and print while the library does the work."""
import ast
import inspect
import re
import textwrap
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from spacy_elmo.cli import app
from spacy_elmo.cli._vocabulary import OLD_SPELLINGS, POSITIONAL_INPUT, modernize

DOCS = Path(__file__).resolve().parents[2] / "docs" / "commands.md"
# spellings the vocabulary replaced: never a flag a parser shows
REPLACED = {"--layer", "--corpus", "--data", "--record", "--format", "--k", "--exclude-unk"}
# positional arguments that name what a command is about, not its input text (docs/commands.md)
POSITIONALS = {"pretrain": {"config_path"}, "finetune": {"config_path"}, "download": {"name"}, "substitutes": {"text"},
               "init-config": {"task"}}
# the library calls that read the model a user names
MODEL_READERS = {"load_bilm", "resolve_bilm", "locate_bilm", "load_lm", "load_lm_head", "load_scoring_lm",
                 "evaluate_corpus", "run_probe", "finetune", "embed_corpus", "embed_corpus_spark", "export_efml",
                 "export_pipeline_bilm"}
# a command function may hold at most this many statements, and build dicts of at most this many
# named keys: it parses and prints, while the library assembles records
MAX_STATEMENTS = 30
MAX_KEYS = 3
# the helper functions cli modules hold besides their commands (the option syntax and the old spellings)
CLI_HELPERS = {
    "_training_options": {"max_time_option", "parse_duration", "load_config", "refused_input"},
    "_vocabulary": {"report", "warn", "modernize", "parse_args", "invoke", "input_files", "output_file", "check_model_flags"},
    "main": {"main"},
    "_app": {"_group"},
}


def _commands():
    return typer.main.get_command(app).commands


def _options(command):
    """flag -> whether it takes a value, for the long options a command's parser shows."""
    return {name: not (p.is_flag or p.count) for p in command.params if p.param_type_name == "option" and not p.hidden
            for name in p.opts if name.startswith("--") and name != "--help"}


def _vocabulary():
    """flag -> the commands docs/commands.md says take it."""
    blocks = DOCS.read_text(encoding="utf-8").split("## One vocabulary", 1)[1].split("\n\n")
    table = next(block for block in blocks if block.startswith("| flag |"))
    documented = {}
    for row in table.splitlines()[2:]:
        flags_cell, _, commands_cell = row.strip("|").split(" | ")
        for flag in re.findall(r"--[a-z0-9-]+", flags_cell):
            documented[flag] = {c.strip() for c in commands_cell.split(",")}
    return documented


def test_the_vocabulary_table_names_only_commands_that_exist_and_every_flag_is_documented_where_shared():
    commands = _commands()
    documented = _vocabulary()
    assert {"--model", "--options", "--weights", "--input", "--output", "--layers", "--lang"} <= set(documented)
    for flag, names in documented.items():
        assert names <= set(commands), (flag, names - set(commands))
    users = {}
    for name, command in commands.items():
        for flag in _options(command):
            users.setdefault(flag, set()).add(name)
    for flag, names in users.items():
        if flag in documented:
            assert names == documented[flag], f"{flag}: taken by {sorted(names)}, documented for {sorted(documented[flag])}"
        else:
            assert len(names) == 1, f"{flag} is taken by {sorted(names)} but has no documented meaning in docs/commands.md"


def test_each_flag_is_a_switch_everywhere_or_takes_a_value_everywhere():
    kinds = {}
    for name, command in _commands().items():
        for flag, takes_value in _options(command).items():
            kinds.setdefault(flag, {})[name] = takes_value
    mixed = {flag: by for flag, by in kinds.items() if len(set(by.values())) > 1}
    assert not mixed, mixed


def test_no_parser_shows_a_replaced_spelling_and_old_spellings_map_to_flags_that_exist():
    commands = _commands()
    for name, command in commands.items():
        assert not REPLACED & set(_options(command)), (name, REPLACED & set(_options(command)))
    for name, spellings in OLD_SPELLINGS.items():
        flags = _options(commands[name])
        for old in spellings:
            assert old.old not in flags and (old.new is None or old.new in flags), (name, old)
    for name in POSITIONAL_INPUT:
        assert "--input" in _options(commands[name])


def test_a_command_that_reads_a_model_takes_model_and_positionals_name_no_input_text():
    for name, function in _command_functions():
        command = _commands()[name]
        flags = _options(command)
        named = {node.id for node in ast.walk(function) if isinstance(node, ast.Name)}
        named |= {node.attr for node in ast.walk(function) if isinstance(node, ast.Attribute)}
        if {"--options", "--weights"} & set(flags) or named & MODEL_READERS:
            assert "--model" in flags, f"{name} reads a model without --model"
        arguments = {p.name for p in command.params if p.param_type_name == "argument"}
        assert arguments == POSITIONALS.get(name, set()), (name, arguments)


def test_old_spellings_are_rewritten_with_a_warning_and_values_are_never_taken_for_flags(capsys):
    params = _commands()["change"].params
    args = ["a.txt", "b.txt", "--layer=mean", "--targets", "t.txt", "--record", "r.json", "--metric", "prt"]
    assert modernize("change", args, params) == [
        "--input", "a.txt", "--input", "b.txt", "--layers=mean", "--targets", "t.txt", "--output", "r.json", "--metric", "prt",
    ]
    said = capsys.readouterr().err
    assert said.count("warning:") == 4 and "--record is now --output" in said
    # a value that looks like a path is a value, not a positional input
    assert modernize("usages", ["--targets", "t.txt", "c.txt"], _commands()["usages"].params) == ["--targets", "t.txt", "--input", "c.txt"]
    assert modernize("substitutes", ["a cat", "--exclude-unk"], _commands()["substitutes"].params) == ["a cat"]
    assert modernize("evaluate", ["--input", "x", "--", "--data"], _commands()["evaluate"].params) == ["--input", "x", "--", "--data"]


def test_neighbors_takes_its_old_spellings_for_one_release(tmp_path):
    result = CliRunner().invoke(app, ["neighbors", "--corpus", str(tmp_path / "missing.txt"), "--query", "a cat",
                                      "--word", "cat", "--k", "2", "--layer", "mean"])
    said = " ".join(result.output.replace("│", " ").split())
    assert "--corpus is now --input" in said and "--k is now --top" in said and "--layer is now --layers" in said
    assert result.exit_code == 2 and "missing.txt: no such file" in said


@pytest.mark.parametrize("name", sorted(typer.main.get_command(app).commands))
def test_help_shows_the_bracketed_text_the_docs_show(name):
    command = _commands()[name]
    written = " ".join([command.help or "", *(getattr(p, "help", None) or "" for p in command.params)])
    result = CliRunner().invoke(app, [name, "--help"])
    assert result.exit_code == 0, result.output
    shown = " ".join(result.output.split())
    for bracketed in re.findall(r"\S*\[[^\]\s]+\]\S*", written):
        assert bracketed in shown, (name, bracketed)
    if name == "embed-corpus":
        assert "pip install spacy-elmo[spark]" in shown
    if name == "finetune":
        assert "`[finetune] warmup_steps`" in shown


def _command_functions():
    for name, command in _commands().items():
        yield name, ast.parse(textwrap.dedent(inspect.getsource(command.callback))).body[0]


def _prints(node):
    """Whether a statement only prints (typer.echo / typer.secho), or is a loop that only prints."""
    if isinstance(node, (ast.For, ast.If)):
        return all(_prints(child) for child in node.body + node.orelse)
    return (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) and isinstance(node.value.func, ast.Attribute)
            and node.value.func.attr in ("echo", "secho"))


@pytest.mark.parametrize("name, function", list(_command_functions()), ids=lambda x: x if isinstance(x, str) else "")
def test_a_command_parses_and_prints_while_the_library_does_the_work(name, function):
    """A command holds few statements; a loop or comprehension in it runs over the command's own
    parameters (what the user gave) or only prints: loops over data are the library's."""
    parameters = {a.arg for a in function.args.args + function.args.kwonlyargs}
    body = [node for statement in function.body for node in ast.walk(statement)]
    statements = [node for node in body if isinstance(node, ast.stmt)]
    assert len(statements) <= MAX_STATEMENTS, f"{name}: {len(statements)} statements; move the work into the library"
    printed = {id(node) for call in body if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
               and call.func.attr in ("echo", "secho") for node in ast.walk(call)}

    def over_parameters(iterable):
        names = [n.id for n in ast.walk(iterable) if isinstance(n, ast.Name)]
        return not [n for n in ast.walk(iterable) if isinstance(n, ast.Call)] and set(names) <= parameters

    for node in body:
        if isinstance(node, ast.Dict):
            assert len([k for k in node.keys if k is not None]) <= MAX_KEYS, f"{name}: a record assembled at line {node.lineno}"
        if isinstance(node, ast.For):
            assert over_parameters(node.iter) or _prints(node), f"{name}: a loop over data at line {node.lineno}"
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)) and id(node) not in printed:
            assert all(over_parameters(g.iter) for g in node.generators), f"{name}: a comprehension over data at line {node.lineno}"


def test_cli_modules_hold_commands_and_only_the_known_helpers():
    commands = {command.callback.__name__ for command in _commands().values()}
    folder = Path(__file__).resolve().parents[2] / "spacy_elmo" / "cli"
    for path in sorted(folder.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        defined = {node.name for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}
        nested = {node.name for top in ast.walk(tree) if isinstance(top, ast.FunctionDef) and top.name in commands
                  for node in ast.walk(top) if isinstance(node, ast.FunctionDef) and node is not top}
        extra = defined - commands - nested - CLI_HELPERS.get(path.stem, set())
        assert not extra, f"{path.name} defines {sorted(extra)}: library work belongs in the library"


def _said(result) -> str:
    return " ".join(result.output.replace("│", " ").split())


# commands with an --output that names a file, each with the rest of a command line that would run
WRITERS = {
    "dump": ["--input", "{text}", "--output"],
    "neighbors": ["--input", "{text}", "--query", "a bank", "--word", "bank", "--output"],
    "usages": ["--input", "{text}", "--targets", "{text}", "--output"],
    "evaluate": ["--input", "{text}", "--output"],
    "senses": ["--input", "{text}", "--word", "bank", "--output"],
    "change": ["--input", "{text}", "--input", "{text}", "--targets", "{text}", "--output"],
}


@pytest.mark.parametrize("name", sorted(WRITERS))
def test_a_folder_as_output_and_a_missing_input_are_refused_in_one_line_before_any_model_is_read(name, tmp_path):
    text = tmp_path / "a.txt"
    text.write_text("a bank\n", encoding="utf-8")
    args = [a.format(text=text) for a in WRITERS[name]]
    # a model that does not exist: had the work begun, the error would name it
    absent = ["--model", str(tmp_path / "no-model")]
    result = CliRunner().invoke(app, [name, *args, str(tmp_path), *absent])
    assert result.exit_code == 2 and f"{tmp_path} is a folder; name the file to write" in _said(result), _said(result)
    args = [a.replace(str(text), str(tmp_path / "missing.txt"), 1) if a == str(text) else a for a in args]
    result = CliRunner().invoke(app, [name, *args, str(tmp_path / "out"), *absent])
    assert result.exit_code == 2 and "missing.txt: no such file, folder or glob" in _said(result), _said(result)
    assert not (tmp_path / "out").exists()


# the rest of a command line of each command that takes --options: what it needs besides the model
NEEDS = {**{name: [*args, "{out}"] for name, args in WRITERS.items()}, "substitutes": ["a bank"],
         "probe": ["--output", "{out}"], "export": ["--to", "onnx", "--output", "{out}"], "finetune": ["{text}", "--output", "{out}"],
         "embed-corpus": ["--input", "{text}", "--output", "{out}"], "serve": []}


def test_every_command_that_takes_options_is_checked_here():
    # convert refuses its own combinations (--to-allennlp and --to-efml take --model alone)
    assert set(NEEDS) | {"convert"} == {n for n, c in _commands().items() if "--options" in _options(c)}


@pytest.mark.parametrize("name", sorted(NEEDS))
def test_options_and_weights_go_together_and_not_with_model_in_every_command(name, tmp_path):
    text = tmp_path / "a.txt"
    text.write_text("a bank\n", encoding="utf-8")
    args = [a.format(text=text, out=tmp_path / "out.x") for a in NEEDS[name]]
    result = CliRunner().invoke(app, [name, *args, "--options", str(tmp_path / "options.json")])
    assert result.exit_code == 2 and "--options and --weights go together" in _said(result), _said(result)
    result = CliRunner().invoke(app, [name, *args, "--model", "x", "--options", "o.json", "--weights", "w.hdf5"])
    assert result.exit_code == 2 and "give --model, or --options and --weights, not both" in _said(result)
    assert "Traceback" not in result.output


@pytest.mark.parametrize("name", ["usages", "senses", "change"])
def test_a_spacy_pipeline_that_is_not_installed_is_named_in_one_line(name, tmp_path, tiny_paths):
    text = tmp_path / "a.txt"
    text.write_text("a bank\n", encoding="utf-8")
    args = [a.format(text=text) for a in WRITERS[name]] + [str(tmp_path / "out.x")]
    model = ["--options", str(tiny_paths[0]), "--weights", str(tiny_paths[1])] if name != "senses" else []
    result = CliRunner().invoke(app, [name, *args, *model, "--pipeline", "xx_not_installed_sm"])
    assert result.exit_code == 2, result.output
    assert "xx_not_installed_sm: no spaCy pipeline of that name is installed" in _said(result)
