"""Contributed biLMs in AllenNLP's format by name (``registry.PUBLISHED_CONTRIBUTED``): a pair at
two URLs (AllenNLP's contributed models), or one archive (.zip or .tar.gz) with the pair in a
folder (SeqVec's seqvec.zip, the clinical elmo.tar.gz, EMBEDDIA's Slovenian .tar.gz).

An archive is downloaded once (resumed, SHA-256 recorded and checked on every later use, as every
download) and kept; its options and weights are copied out, found by the base names the registry
gives, into ``options.json`` and ``weights.hdf5`` beside it, with a record of the archive's digest
that says the copy is complete and of this archive. Only those two members are read: a member's
path never decides where anything is written, an archive holding links, devices or path-like names
is refused (``archive.tar_members``), the weights are copied within what the options imply, and
nothing is executed or unpickled.

SeqVec's tokens are protein residues, one amino-acid letter each, not words: ``protein_residues``
turns a sequence into them, and no blank spaCy pipeline is made for it (``pipeline_refusal``).
"""
import json
import os
import tarfile
import zipfile
from pathlib import Path, PurePosixPath
from typing import IO, Dict, List, Optional, Tuple

from ..files import cache_dir, file_sha256
from .allennlp import load_allennlp
from .archive import ARCHIVE_ERRORS, check_declared, copy_limited, member_limit, pair_weights_limit, tar_members, zip_members
from .download import OPTIONS_NAME, WEIGHTS_NAME, Transfer, ensure_file, fetch_pair
from .download_record import recorded_sha256
from .errors import ModelFileError
from .registry import PUBLISHED_CONTRIBUTED, ContributedModel, published_names

EXTRACTED_RECORD = "extracted.json"
MAX_OPTIONS_BYTES = 1 << 20


def contributed_model(name: str) -> ContributedModel:
    """The contributed model called ``name``, with an error that lists the names."""
    if name not in PUBLISHED_CONTRIBUTED:
        raise ModelFileError(name, f"not found: neither an existing path nor a published model name ({published_names()})")
    return PUBLISHED_CONTRIBUTED[name]


def fetch_contributed(
    name: str,
    *,
    directory: Optional[Path] = None,
    base_url: Optional[str] = None,
    transfer: Optional[Transfer] = None,
    allow_http: bool = False,
) -> Tuple[Path, Path]:
    """The options and weights of the contributed model ``name``, downloaded unless already there.

    directory (Optional[Path]): where the files go (default: ``cache_dir() / NAME``).
    base_url (Optional[str]): the server below which the files are (a pair: default
        ``models_base_url()``; an archive: its file name below it, default its publisher's URL).
    transfer (Optional[Transfer]): retries, timeout and progress output.
    allow_http (bool): download over plain http too (with a warning).
    RETURNS (Tuple[Path, Path]): options.json and weights.hdf5, verified.
    """
    model = contributed_model(name)
    directory = Path(directory) if directory is not None else cache_dir() / model.name
    allow_http = allow_http or model.http_only
    if model.archive is None:
        return fetch_pair(
            model.options_url(base_url), model.weights_url(base_url), directory,
            options_sha256=model.options_sha256, weights_sha256=model.weights_sha256,
            transfer=transfer, allow_http=allow_http,
        )
    directory.mkdir(parents=True, exist_ok=True)
    archive = ensure_file(
        model.archive_url(base_url), directory / model.archive_name, sha256=model.sha256,
        check=lambda path: pair_members(path, model), transfer=transfer, allow_http=allow_http,
    )
    options, weights = directory / OPTIONS_NAME, directory / WEIGHTS_NAME
    digest = recorded_sha256(archive) or file_sha256(archive)
    record = directory / EXTRACTED_RECORD
    if _read_record(record).get("archive_sha256") == digest and options.is_file() and weights.is_file():
        return options, weights
    record.unlink(missing_ok=True)
    extract_pair(archive, model, directory)
    try:  # the copied pair must load before it is recorded as complete
        load_allennlp(options, weights)
    except ModelFileError as error:
        options.unlink()
        weights.unlink()
        member = model.weights_member if Path(error.path).name == WEIGHTS_NAME else model.options_member
        raise ModelFileError(archive, f"{member}: {error.problem}") from error
    record.write_text(json.dumps({"archive_sha256": digest, "url": model.archive, "name": model.name}) + "\n",
                      encoding="utf-8")
    return options, weights


def pair_members(path: Path, model: ContributedModel) -> Tuple[str, str]:
    """The options and weights members of a contributed archive, found by the registry's base
    names; the options must parse. Raises ModelFileError naming the archive and what it holds.

    RETURNS (Tuple[str, str]): the two members' names in the archive.
    """
    wanted = [PurePosixPath(model.options_member or OPTIONS_NAME).name, PurePosixPath(model.weights_member or "").name]
    sizes = _member_sizes(path)
    found: List[str] = []
    for base in wanted:
        names = [name for name in sizes if PurePosixPath(name).name == base]
        if len(names) != 1:
            held = ", ".join(sorted(sizes)) or "no files"
            count = "no member" if not names else f"{len(names)} members"
            raise ModelFileError(path, f"{count} named {base} (published as {model.options_member} and "
                                       f"{model.weights_member}); it holds {held}")
        check_declared(path, names[0], sizes[names[0]], member_limit())
        found.append(names[0])
    check_declared(path, found[0], sizes[found[0]], MAX_OPTIONS_BYTES)
    try:
        with _open_member(path, found[0]) as source:
            data = source.read(MAX_OPTIONS_BYTES + 1)
    except ARCHIVE_ERRORS as error:
        raise ModelFileError(path, f"{found[0]} could not be read from the archive ({error})") from error
    check_declared(path, found[0], len(data), MAX_OPTIONS_BYTES)
    try:
        json.loads(data.decode("utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError) as error:
        raise ModelFileError(path, f"{found[0]} is not a JSON options file ({error})") from error
    return found[0], found[1]


def extract_pair(path: Path, model: ContributedModel, target: Path) -> Tuple[Path, Path]:
    """Copy the archive's options and weights into ``target`` as options.json and weights.hdf5,
    each through a ``.part`` file renamed into place, the weights held to what the options imply
    (``archive.pair_weights_limit``). RETURNS (Tuple[Path, Path]): the two files."""
    target.mkdir(parents=True, exist_ok=True)
    written: List[Path] = []
    for member, name in zip(pair_members(path, model), (OPTIONS_NAME, WEIGHTS_NAME)):
        part = target / (name + ".part")
        limit = pair_weights_limit(written[0], path) if written else MAX_OPTIONS_BYTES
        try:
            with _open_member(path, member) as source:
                copy_limited(source, part, limit, archive=path, member=member)
        except ARCHIVE_ERRORS as error:
            part.unlink(missing_ok=True)
            raise ModelFileError(path, f"{member} could not be read from the archive ({error})") from error
        os.replace(part, target / name)
        written.append(target / name)
    return written[0], written[1]


def _member_sizes(path: Path) -> Dict[str, int]:
    """RETURNS (Dict[str, int]): the regular files in a .zip or .tar(.gz) and their sizes (links,
    devices and path-like names refused, folders left out), by their names in the archive."""
    try:
        if zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as archive:
                return {info.filename: info.file_size for info in zip_members(archive, path)}
        with tarfile.open(path, "r:*") as archive:
            return {member.name: member.size for member in tar_members(archive, path)}
    except ARCHIVE_ERRORS as error:
        raise ModelFileError(path, f"not a readable .zip or .tar.gz archive ({error})") from error


class _open_member:  # noqa: N801 (used as a context manager, like open)
    """One regular member of a .zip or .tar(.gz), opened for reading."""

    def __init__(self, path: Path, member: str) -> None:
        self.path, self.member = path, member
        self.archive = None

    def __enter__(self) -> IO[bytes]:
        if zipfile.is_zipfile(self.path):
            self.archive = zipfile.ZipFile(self.path)
            return self.archive.open(self.member)
        self.archive = tarfile.open(self.path, "r:*")
        info = self.archive.getmember(self.member)
        source = self.archive.extractfile(info) if info.isreg() else None
        if source is None:
            raise ModelFileError(self.path, f"{self.member} is not a regular file in the archive")
        return source

    def __exit__(self, *exc) -> None:
        if self.archive is not None:
            self.archive.close()


def _read_record(record: Path) -> dict:
    """RETURNS (dict): what a complete copy recorded; empty where there is no record or a damaged one."""
    try:
        data = json.loads(record.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def pipeline_refusal(model: Optional[str]) -> Optional[str]:
    """Why no blank spaCy pipeline is made for a biLM, or None where one is.

    model (Optional[str]): a published name, or a path: the cache folder ``fetch_contributed``
        wrote (its record names the model) is recognised; any other folder is not.
    RETURNS (Optional[str]): the message (a model whose tokens are no language's words), or None.
    """
    name = model
    if model is not None and Path(model).expanduser().is_dir():
        recorded = _read_record(Path(model).expanduser() / EXTRACTED_RECORD)
        name = recorded.get("name") if isinstance(recorded.get("name"), str) else None
    entry = PUBLISHED_CONTRIBUTED.get(name or "")
    if entry is None or entry.tokens == "words":
        return None
    return (
        f"{model}: its tokens are {entry.tokens} (one amino-acid letter each) of protein sequences, not words of a "
        "language, and no spaCy tokenizer splits a sequence into them; no pipeline is written. Use it from Python: "
        f"bilm = spacy_elmo.load_bilm({name!r}); bilm.embed([protein_residues('MKTAYIAKQR')]) "
        "(protein_residues from spacy_elmo.io.contributed; docs/formats.md, SeqVec)"
    )


def protein_residues(sequence: str) -> List[str]:
    """A protein sequence as SeqVec's tokens: one residue (amino-acid letter) a token, upper-cased,
    with whitespace (a FASTA record's line breaks) removed, as SeqVec reads FASTA files.

    sequence (str): one-letter amino-acid codes (20 standard letters and X, B, Z, U, O, ...).
    RETURNS (List[str]): one token per residue. A character that is no letter (a digit, "*",
    "-") is a ValueError naming it and its position: SeqVec's tokens are letters only.
    """
    residues = "".join(sequence.split()).upper()
    for position, residue in enumerate(residues):
        if not ("A" <= residue <= "Z"):
            raise ValueError(f"{residue!r} at position {position} of the sequence is not an amino-acid letter (A-Z)")
    if not residues:
        raise ValueError("an empty protein sequence has no residues to embed")
    return list(residues)

