"""What made a recorded number: the command, the code it started from, the model, the data, the
machine and the date.

The commands that write results (``evaluate``, ``probe``, ``neighbors``, ``finetune``, the corpus
statistics of ``pretrain``) put this record at the top level of their JSON, under ``"provenance"``,
so that a number can be traced to the code, the weights and the files that produced it. The
repository's own results files (``results/``, benchmarks in ``results/bench/``) are held to a check beside the
package (``lab/records/check.py``); ``results/README.md`` describes the fields for readers.

The record (``provenance(...)``):

- ``command``: the command line that ran (paths as ``portable_path`` writes them).
- ``start_commit``, ``start_clean``, ``started``: the commit checked out when the run started, whether
  the tracked files other than ``results/`` matched it then, and when. An
  entry point calls ``mark_start()`` before its work; a record whose run never marked a start takes
  them when it is written, says so under ``unknown`` and leaves ``started`` null (which
  ``check_record`` refuses in a new record).
- ``commit``, ``dirty``: the same when the record was written (the code may have changed meanwhile).
  A copy of the checkout without its ``.git`` (sent to a GPU machine) reads both from the manifest
  that ``$SPACY_ELMO_TREE_MANIFEST`` names (``write_tree_manifest``), checking every file against it.
- ``dirty_note`` (where given, or ``$SPACY_ELMO_DIRTY_NOTE``): what a run from a tree with
  uncommitted changes knows of them.
- ``model``: ``model_record(...)`` of the biLM the run used (name, version, weights file and its
  SHA-256), a list of them where the run used several (a file that gathers runs lists each distinct
  model its runs used), or null with ``model_note`` saying why there is none (randomly initialised
  weights, a pipeline trained without ELMo). ``model_note`` may also qualify a model or a list.
- ``data``: ``data_record(...)``: the SHA-256 of every input data file the run read (corpora, .spacy
  files, test text) by its portable path; ``{}`` with ``data_note`` when it read none (generated
  sentences). A file that gathers runs holds the union of its runs' data.
- ``cpu``, ``cpu_id``, ``cpu_folder``, ``cpu_flags``, ``cpu_capability``, ``kernel_variant``,
  ``fp32_routes``, ``cpu_count``, ``torch_threads``, ``python``, ``torch``, ``spacy_elmo``, ``date``
  (UTC, when written): the machine (its CPU's name; its vendor, family and model as /proc/cpuinfo
  gives them, ``records.machine.cpu_identity``, and the folder its benchmark records go to,
  ``records.machine.cpu_folder``: records before 2026-12-06 lack both), the kernels' instruction set chosen for it (``records.machine.kernel_variant``), the routes the
  fp32 products took and why (``records.machine.fp32_routes``; recorded when written, so after the
  run) and the versions.
- ``unknown`` (only in records written before ``SCHEMA_DATE``, filled in afterwards): {field: why it
  is null}. ``backfilled`` says where each field added afterwards came from.

No absolute machine path appears in a record: ``portable_path`` writes a path inside the checkout
relative to it, a path in a datasets folder as ``assets/datasets/...`` (project.yml's
``vars.datasets``), and any other by its last three parts, ``.../GRANDPARENT/PARENT/NAME``.
"""
import datetime
import hashlib
import os
import platform
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Sequence, Union

import torch

from ..files import file_sha256
from .machine import cpu_flags, cpu_folder, cpu_identity, cpu_model, fp32_routes, kernel_variant

CHECKOUT = Path(__file__).resolve().parents[2]
# what runs write, not what they run: a changed results file does not make the code dirty
RESULTS_EXCLUDED = (":(exclude)results",)
# a datasets folder (project.yml's vars.datasets, or a mirror of it) is written as this
DATASETS = "assets/datasets"
DATA_ENV = "SPACY_ELMO_DATA"
# what a run from a tree with uncommitted changes says about them, for commands that take no argument for it
DIRTY_NOTE_ENV = "SPACY_ELMO_DIRTY_NOTE"
# a copy of the checkout without .git: the manifest of the commit it was copied from (write_tree_manifest)
TREE_MANIFEST_ENV = "SPACY_ELMO_TREE_MANIFEST"
UNVERSIONED = "unversioned"
PathLike = Union[str, Path]

_UNSET: Any = object()
_start: Optional[Dict[str, Any]] = None


def mark_start(command: Optional[str] = None) -> Dict[str, Any]:
    """Take the run's start snapshot: call it at the entry point (a command, a script's ``main``)
    before the work. Records written later in this process name it, until the next call.

    command (Optional[str]): the command line, where this process's ``sys.argv`` is not it.
    RETURNS (Dict[str, Any]): start_commit, start_clean (None outside a git checkout), started (UTC),
        and command (None unless given).
    """
    global _start
    _start = start_snapshot(command)
    return dict(_start)


def start_snapshot(command: Optional[str] = None) -> Dict[str, Any]:
    """RETURNS (Dict[str, Any]): the checkout's commit and cleanliness now, without keeping them: what
    ``mark_start`` keeps, or what another process hands to ``provenance(start=...)``."""
    commit, dirty = _checkout_state()
    return {"command": command, "start_commit": commit, "start_clean": None if dirty is None else not dirty,
            "started": _now()}


def provenance(
    command: Optional[str] = None,
    *,
    model: Any = _UNSET,
    data: Any = _UNSET,
    model_note: Optional[str] = None,
    data_note: Optional[str] = None,
    start: Optional[Dict[str, Any]] = None,
    dirty_note: Optional[str] = None,
) -> Dict[str, Any]:
    """The record that goes into a results file, under ``"provenance"`` (see the module's docstring).

    command (Optional[str]): the command line (default: the one given to ``mark_start``, else this
        process's).
    model: ``model_record(...)``, a list of them, or None (then ``model_note`` says why).
    data (Dict[str, str]): ``data_record(...)``; ``{}`` (then ``data_note`` says why) when none was read.
    model_note, data_note (Optional[str]): why there is no model or no data; a qualification otherwise.
    start (Optional[Dict[str, Any]]): a ``start_snapshot()`` taken elsewhere (default: ``mark_start``'s).
    dirty_note (Optional[str]): where the run started from a tree with uncommitted changes, what they
        were and why the numbers stand (default: ``$SPACY_ELMO_DIRTY_NOTE``); a results file from
        such a tree needs one (``lab/records/check.py``).
    A model or data left out is missing from the record, and ``check_record`` names it.
    RETURNS (Dict[str, Any]): the record.
    """
    from .. import __version__

    commit, dirty = _checkout_state()
    start = start if start is not None else _start
    record: Dict[str, Any] = {"command": command or (start or {}).get("command") or command_line()}
    unknown = {}
    if start is not None:
        record.update({k: start[k] for k in ("start_commit", "start_clean", "started")})
    else:
        record.update({"start_commit": commit, "start_clean": None if dirty is None else not dirty, "started": None})
        unknown["started"] = ("no run start was marked (provenance.mark_start): start_commit and start_clean "
                              "are the checkout's when the record was written")
    record.update({"commit": commit, "dirty": dirty})
    dirty_note = dirty_note or os.environ.get(DIRTY_NOTE_ENV)
    if dirty_note:
        record["dirty_note"] = dirty_note
    if model is not _UNSET:
        record["model"] = model
    if model_note:
        record["model_note"] = model_note
    if data is not _UNSET:
        record["data"] = data
    if data_note:
        record["data_note"] = data_note
    record.update({
        "cpu": cpu_model(),
        "cpu_id": cpu_identity(),
        "cpu_folder": cpu_folder(),
        "cpu_flags": cpu_flags(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "kernel_variant": kernel_variant(),
        "fp32_routes": fp32_routes(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "spacy_elmo": __version__,
        "date": _now(),
    })
    if unknown:
        record["unknown"] = unknown
    return record


def model_record(
    path: Optional[PathLike] = None, *, options: Optional[PathLike] = None, weights: Optional[PathLike] = None
) -> Dict[str, Any]:
    """The biLM a run used, found as ``load_bilm`` finds it (same arguments; nothing is loaded).

    RETURNS (Dict[str, Any]): name (the shipped model's, a published name, a pipeline's, else the
        path), version (the shipped model's as its model card gives it, a training output's stage
        and step, a pipeline's version, a published model's shape; "unversioned" where the files
        say none: the digest identifies them), weights (the weights file: our directory's
        model.safetensors, a pipeline's elmo component's, a published pair's HDF5, a zip or tar,
        ELMoForManyLangs' encoder.pkl, a TensorFlow checkpoint's data shard: the first of the
        source's ``files()``) and weights_sha256 (its SHA-256); also_sha256 the digests of its other
        weight files by name (ELMoForManyLangs' token_embedder.pkl, a checkpoint's index).
    """
    from ..io.loading import locate_bilm

    source = locate_bilm(path, options=options, weights=weights, what="model_record")
    given = None if path is None else Path(path).expanduser()
    file, *also = source.files()
    if source.name is not None:
        name = source.name
    elif given is not None:
        name = portable_path(given)
    else:  # a pair given as two files: the folder holding them
        name = portable_path(file.parent)
    version = source.version() or UNVERSIONED
    others = {extra.name: file_sha256(extra) for extra in also}
    base = given if given is not None and given.is_dir() else file.parent
    try:  # below the folder the model is named by, so that the two read alike
        written = f"{portable_path(base)}/{file.resolve().relative_to(base.resolve()).as_posix()}"
    except ValueError:
        written = portable_path(file)
    record = {"name": name, "version": version, "weights": written,
              "weights_sha256": file_sha256(file)}
    if others:
        record["also_sha256"] = others
    return record


def data_record(paths: Union[None, PathLike, Iterable[Optional[PathLike]]]) -> Dict[str, str]:
    """The input data files a run read, with their SHA-256.

    paths: files, or directories (every file below them, hidden ones aside); None entries are skipped.
    RETURNS (Dict[str, str]): {portable path: SHA-256}, sorted by path.
    """
    if paths is None:
        return {}
    if isinstance(paths, (str, Path)):
        paths = [paths]
    files: List[Path] = []
    for path in paths:
        if path is None:
            continue
        path = Path(path).expanduser()
        if path.is_dir():
            files += sorted(p for p in path.rglob("*") if p.is_file() and not p.name.startswith("."))
        else:
            files.append(path)
    # shortened paths of two inputs can coincide (``train-00.txt`` of two corpora): those keep more
    # of their folders until each is named once, so no digest is lost under another's name
    files = list({os.path.abspath(p): p for p in files}.values())
    depth, named = 3, {}
    while files:
        keys = [portable_path(p, depth=depth) for p in files]
        clashing = {k for k in keys if keys.count(k) > 1}
        named.update((k, file_sha256(p)) for k, p in zip(keys, files) if k not in clashing)
        deeper = [p for k, p in zip(keys, files) if k in clashing]
        if deeper and all(portable_path(p, depth=depth + 1) == portable_path(p, depth=depth) for p in deeper):
            # they differ only in the machine's top-level folder, which records never name: numbered
            named.update((f"{portable_path(p, depth=depth)}#{i}", file_sha256(p)) for i, p in enumerate(deeper, 1))
            break
        files, depth = deeper, depth + 1
    return dict(sorted(named.items()))


def portable_path(path: PathLike, *, depth: int = 3) -> str:
    """A path as a record writes it: relative to the checkout inside it, ``assets/datasets/...`` in a
    datasets folder ($SPACY_ELMO_DATA, or any folder named ``datasets``, as project.yml's
    ``vars.datasets`` and its mirrors are), else its last ``depth`` parts (three:
    ``.../GRANDPARENT/PARENT/NAME``) below the machine's top-level folder: never a machine's absolute
    path or its top folders."""
    text = str(path)
    full = Path(os.path.abspath(os.path.expanduser(text)))
    for root in (CHECKOUT, CHECKOUT.resolve()):
        if _is_below(full, root):
            return full.relative_to(root).as_posix() or "."
    data = os.environ.get(DATA_ENV)
    if data and _is_below(full, Path(os.path.abspath(os.path.expanduser(data)))):
        return "/".join([DATASETS, full.relative_to(os.path.abspath(os.path.expanduser(data))).as_posix()])
    parts = full.parts
    if "datasets" in parts:  # the folder itself or a file below it
        below = parts[len(parts) - parts[::-1].index("datasets"):]
        return "/".join([DATASETS, *below])
    if not Path(text).is_absolute() and not text.startswith(("~", "..")):
        return Path(text).as_posix()
    # parts[0] is the root ("/") and parts[1] a machine's top-level folder (/work, /tmp, /home): never named
    return "/".join(["...", *parts[2:][-depth:]]) if len(parts) > 2 else "..."


def model_name(model: Optional[PathLike] = None, options: Optional[PathLike] = None, weights: Optional[PathLike] = None) -> str:
    """How a record names the model a command was given: its path or name, the published pair, or the shipped biLM."""
    if model is not None:
        return portable_path(model)
    if options is not None or weights is not None:
        return f"{portable_path(options)} + {portable_path(weights)}"
    return "shipped en_small"


def command_line(argv: Optional[Sequence[str]] = None, *, module: Optional[str] = None) -> str:
    """This process's command as a reader would type it: ``python -m MODULE`` for a module run so (a
    package's ``__main__.py`` as ``-m PACKAGE``), paths inside the current directory made relative,
    other paths as ``portable_path`` writes them.

    argv (Optional[Sequence[str]]): the program and its arguments (default: this process's).
    module (Optional[str]): the module the program is, run with ``-m`` (default: this process's main
        module where it was run with ``-m`` and no argv is given).
    RETURNS (str): the command line.
    """
    args = list(sys.argv if argv is None else argv)
    if module is None and argv is None:
        spec = getattr(sys.modules.get("__main__"), "__spec__", None)
        module = spec.name if spec is not None else None
    program = Path(args[0]).resolve() if args else Path("python")
    if module is not None:
        first = ["-m", module[: -len(".__main__")] if module.endswith(".__main__") else module]
    elif program.name == "__main__.py":
        first = ["-m", program.parent.name]
    else:
        first = [_relative(str(program))]
    return shlex.join(["python", *first, *portable_args(args[1:])])


def portable_args(args: Sequence[str]) -> List[str]:
    """RETURNS (List[str]): command-line arguments with their paths (also after ``NAME=`` or
    ``--option=``) relative to the current directory inside it, else as ``portable_path`` writes them."""
    return [_relative(str(a)) for a in args]


def _relative(arg: str) -> str:
    """An argument with its path (or the path after ``NAME=`` / ``--option=``, or each of a
    comma-separated list of paths there) written portably."""
    head, sep, tail = arg.partition("=") if "=" in arg and not arg.startswith(("/", "~", "..")) else ("", "", arg)
    if "," in tail:
        return head + sep + ",".join(_relative_path(part) for part in tail.split(","))
    return head + sep + _relative_path(tail)


def _relative_path(arg: str) -> str:
    if not arg.startswith(("/", "~", "../")):
        return arg
    path = Path(os.path.expanduser(arg))
    try:
        written = path.relative_to(Path.cwd()).as_posix() if path.is_absolute() else None
    except ValueError:
        written = None
    return written if written is not None else portable_path(arg)


def _checkout_state() -> tuple:
    if not (CHECKOUT / ".git").exists() and os.environ.get(TREE_MANIFEST_ENV):
        return manifest_state(Path(os.environ[TREE_MANIFEST_ENV]))
    commit = _git("rev-parse", "HEAD")
    changed = _git("status", "--porcelain", "--untracked-files=no", "--", ".", *RESULTS_EXCLUDED)
    return commit, None if changed is None else bool(changed)


def write_tree_manifest(path: PathLike) -> str:
    """For a copy of the checkout without its ``.git`` (sent to another machine): the commit and
    every tracked file's git blob id (``git ls-files -s``), written to ``path``; the copy's records
    then read their commit and cleanliness from it (``$SPACY_ELMO_TREE_MANIFEST``, ``manifest_state``).

    RETURNS (str): the commit.
    """
    commit, listing = _git("rev-parse", "HEAD"), _git("ls-files", "-s")
    if commit is None or listing is None:
        raise RuntimeError(f"{CHECKOUT} is not a git checkout: there is no commit to write")
    Path(path).write_text(f"commit {commit}\n{listing}\n", encoding="utf-8")
    return commit


def manifest_state(path: Path) -> tuple:
    """The commit a manifest (``write_tree_manifest``) names, and whether any tracked file outside
    ``results/`` differs from it here: each file's git blob id is computed anew and compared.

    RETURNS (tuple): (commit, dirty).
    """
    lines = path.read_text(encoding="utf-8").splitlines()
    if not lines or not lines[0].startswith("commit "):
        raise ValueError(f"{path}: not a tree manifest (its first line names no commit)")
    commit = lines[0].split()[1]
    for line in filter(None, lines[1:]):
        meta, name = line.split("\t", 1)
        mode, blob, _ = meta.split()
        if name.startswith("results/"):
            continue
        file = CHECKOUT / name
        if mode == "120000":
            data = os.readlink(file).encode() if file.is_symlink() else None
        else:
            data = file.read_bytes() if file.is_file() and not file.is_symlink() else None
        if data is None or hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest() != blob:
            return commit, True
    return commit, False


def _is_below(path: Path, root: Path) -> bool:
    try:
        path.relative_to(root)
    except ValueError:
        return False
    return True


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def _git(*args: str) -> Optional[str]:
    if not (CHECKOUT / ".git").exists():
        return None
    found = subprocess.run(["git", "-C", str(CHECKOUT), *args], capture_output=True, text=True, check=False)
    return found.stdout.strip() if found.returncode == 0 else None
