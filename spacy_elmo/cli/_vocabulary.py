"""The command line's one vocabulary (docs/commands.md): the options several commands share, and the
old spellings kept for one release.

An old spelling is rewritten into the new one before click parses the command line, with a
deprecation warning on standard error, so no command declares it: ``--help`` and the parser show
only the vocabulary. A command whose input text was a positional argument takes its bare
arguments as ``--input`` the same way.

What can be checked from the command line alone is checked before any model is loaded or text read,
in one line each: ``--options`` and ``--weights`` go together and exclude ``--model``
(``CommandWithOldSpellings``), an ``--input`` names files that exist (``input_files``), and an
``--output`` that names a file is not a folder (``output_file``).
"""
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import typer
from typer.core import TyperCommand

INPUT = ("a text file (plain, .gz, .bz2, .xz, .zst or .lz4), a folder (its .txt, .text and .tokens files, plain "
         "or compressed) or a glob")
MODEL_HELP = ("any biLM load_bilm takes: a published name, our directory, a spaCy pipeline, a folder holding a "
              "published pair, a zip, an ELMoForManyLangs directory, a TensorFlow checkpoint (default: the shipped biLM)")
MODEL = typer.Option(None, "--model", help=MODEL_HELP)
OPTIONS = typer.Option(None, "--options", help="a published options.json (with --weights), instead of --model")
WEIGHTS = typer.Option(None, "--weights", help="its HDF5 weights (with --options)")
STRICT_UTF8 = typer.Option(
    False, "--strict-utf8", help="refuse a line that is not UTF-8, naming its file and line (default: its bad "
    "bytes are replaced by U+FFFD and the lines counted)"
)


@dataclass(frozen=True)
class Renamed:
    """An old spelling of a flag.

    old (str): the flag as it was. new (Optional[str]): the flag now; None: dropped, its meaning
        now the default. note (str): what to say beside the warning.
    """

    old: str
    new: Optional[str]
    note: str = ""


# command -> its old spellings, kept for one release (docs/commands.md)
OLD_SPELLINGS: Dict[str, Tuple[Renamed, ...]] = {
    "evaluate": (Renamed("--data", "--input"), Renamed("--format", "--input-format")),
    "neighbors": (Renamed("--corpus", "--input"), Renamed("--k", "--top"), Renamed("--layer", "--layers")),
    "usages": (Renamed("--layer", "--layers"),),
    "change": (Renamed("--layer", "--layers"), Renamed("--record", "--output", "a name ending in .json gets the JSON record")),
    "download": (Renamed("--options", "--options-url"), Renamed("--weights", "--weights-url"),
                 Renamed("--pipeline", "--as-pipeline")),
    "substitutes": (Renamed("--exclude-unk", None, "substitutes are words by default; --all-entries keeps <UNK>"),),
    "embed-corpus": (Renamed("--precision", "--dtype", "the layers' storage dtype"),),
}
# commands whose input text was given as positional arguments, now --input
POSITIONAL_INPUT = {"usages", "senses", "change"}


def report(stats: Any) -> None:
    """Print on standard error what the text reader says about undecodable lines, if anything."""
    if stats.report():
        typer.echo(stats.report(), err=True)


# commands whose --input is a training corpus: every file of a folder is read (by its format, or as text)
CORPUS_INPUT = {"evaluate"}
# commands that also read an embed-corpus output folder as their corpus
EMBEDDED_INPUT = {"usages", "change", "senses"}


def input_files(ctx: typer.Context, value: Any) -> Any:
    """``--input``'s check: every file, folder or glob it names exists, and a folder holds files in the
    formats the command reads (``io.text_input.text_files``)."""
    from ..io.text_input import TEXT_SUFFIXES, text_files

    from ..io.embedded_corpus import is_embedded_folder

    suffixes = None if ctx.info_name in CORPUS_INPUT else TEXT_SUFFIXES
    for spec in value if isinstance(value, (list, tuple)) else [value]:
        if ctx.info_name in EMBEDDED_INPUT and is_embedded_folder(spec):
            continue
        try:
            text_files(spec, suffixes=suffixes)
        except FileNotFoundError as err:
            raise typer.BadParameter(str(err)) from None
    return value


def output_file(value: Union[None, Path, Sequence[Path]]) -> Any:
    """An ``--output`` that names a file: refused where it is an existing folder, before the work."""
    for path in [] if value is None else value if isinstance(value, (list, tuple)) else [value]:
        if Path(path).is_dir():
            raise typer.BadParameter(f"{path} is a folder; name the file to write")
    return value


def check_model_flags(params: Sequence[Any], values: Dict[str, Any]) -> None:
    """--options and --weights name one published pair, in place of --model.

    params (Sequence[Parameter]): the command's (click) parameters. values (Dict[str, Any]): their values.
    """
    given = {flag: any(flag in p.opts and values.get(p.name) is not None for p in params)
             for flag in ("--model", "--options", "--weights")}
    if given["--options"] != given["--weights"]:
        raise typer.BadParameter("--options and --weights go together: give both (a published pair), or --model")
    if given["--model"] and given["--options"]:
        raise typer.BadParameter("give --model, or --options and --weights, not both")


def warn(message: str) -> None:
    typer.echo(f"warning: {message}; the old spelling goes in the next release", err=True)


def modernize(command: str, args: Sequence[str], params: Sequence[Any]) -> List[str]:
    """``args`` with every old spelling of ``command`` rewritten into the vocabulary (warned about).

    params (Sequence[Parameter]): the command's (click) parameters, to tell an option's value from a
        positional argument.
    RETURNS (List[str]): the arguments to parse.
    """
    renamed = {r.old: r for r in OLD_SPELLINGS.get(command, ())}
    takes_value = {name for p in params if p.param_type_name == "option" and not p.is_flag and not p.count
                   for name in (*p.opts, *p.secondary_opts)}
    out: List[str] = []
    rest = list(args)
    while rest:
        arg = rest.pop(0)
        if arg == "--":
            out += [arg, *rest]
            break
        flag, equals, value = arg.partition("=")
        if flag in renamed:
            old = renamed[flag]
            if old.new is None:
                warn(f"{old.old} is no longer needed: {old.note}")
                if flag in takes_value and not equals and rest:
                    rest.pop(0)
                continue
            warn(f"{old.old} is now {old.new}" + (f" ({old.note})" if old.note else ""))
            flag = old.new
            arg = f"{flag}={value}" if equals else flag
        if arg.startswith("-") and len(arg) > 1:
            out.append(arg)
            if flag in takes_value and not equals and rest:
                out.append(rest.pop(0))
        elif command in POSITIONAL_INPUT:
            warn(f"the input as a positional argument ({arg}) is now --input {arg}")
            out += ["--input", arg]
        else:
            out.append(arg)
    return out


# what an ImportError of a missing extra says (usage/extra.py, and the ray, spark, export and serve extras)
EXTRA_HINT = "pip install 'spacy-elmo["


class CommandWithOldSpellings(TyperCommand):
    """A command of the vocabulary: it still reads the old spellings of its flags (``OLD_SPELLINGS``),
    for one release, refuses flags that do not go together before it runs (``check_model_flags``),
    and stops with one line where an optional extra it needs is missing (the library's ImportError
    names the ``pip install 'spacy-elmo[EXTRA]'`` that adds it)."""

    def parse_args(self, ctx: Any, args: List[str]) -> List[str]:
        rest = super().parse_args(ctx, modernize(self.name or "", args, self.params))
        if not ctx.resilient_parsing:
            check_model_flags(self.params, ctx.params)
        return rest

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except ImportError as err:
            if EXTRA_HINT not in str(err):
                raise
            typer.echo(str(err), err=True)
            raise typer.Exit(1) from None
