"""Models on the Hugging Face Hub, named ``hf:OWNER/REPO`` or ``hf:OWNER/REPO@REVISION``.

Fetched with huggingface_hub (the ``hub`` extra: ``pip install 'spacy-elmo[hub]'``), so that a
model comes as every Hub model does: into its cache (``HF_HUB_CACHE``, else ``HF_HOME/hub``),
at a branch, tag or commit, with the user's token (``HF_TOKEN``), from ``HF_ENDPOINT``, and
without network under ``HF_HUB_OFFLINE=1``. These variables are read at each call (not when
huggingface_hub is first imported), so a process may change them.

A repository holds a model in any layout ``load_bilm`` reads from a folder: a published pair
(options.json beside weights.hdf5, lm_weights.hdf5 or AllenNLP's names), NLPL's zip, our
directory (config.json + model.safetensors), a spaCy pipeline with an elmo component as
``nlp.to_disk`` writes it (uploaded with ``HfApi().upload_folder``). Of a pair only its two files are
fetched, of a pipeline all its files; otherwise every file at the repository's top; never
``.gitattributes`` or Markdown. Each file must have the
size the Hub states for it and its digest (the SHA-256 of a file kept in LFS, the git blob id of
one that is not) before anything reads it; a file that does not, or does not arrive, is an
error in one line, and the call leaves in the cache nothing it put there. A file in the cache
that no longer matches (damaged since it came) is fetched again, with a line on stderr. Offline,
the files a revision was fetched with are checked again against the digests the cache names them by;
so they are where the Hub cannot be reached at all (no answer), with a line on stderr.
Then the folder goes to the loader's own rules (``loading``), bounds included.
"""
import hashlib
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, List, Optional, Sequence, Set, Tuple

from ..files import file_sha256
from .allennlp import find_pair
from .download_record import note
from .errors import ModelFileError

PREFIX = "hf:"
INSTALL = "pip install 'spacy-elmo[hub]'"
_REPO = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*")
_COMMIT = re.compile(r"[0-9a-f]{40}")
_DIGESTS = {64: "sha256", 40: "git blob id"}
SKIPPED = (".gitattributes",)
PIPELINE_CONFIG = "config.cfg"  # a spaCy pipeline's, as sources.PIPELINE_CONFIG_NAME
DEFAULT_REVISION = "main"


@dataclass(frozen=True)
class HubId:
    """A repository on the Hub and the revision asked for (None: its default branch)."""

    repo: str
    revision: Optional[str] = None

    def __str__(self) -> str:
        return f"{PREFIX}{self.repo}" + (f"@{self.revision}" if self.revision else "")


@dataclass(frozen=True)
class HubSnapshot:
    """A repository's files at one commit, in the cache, verified.

    hub_id (HubId): what was asked for. commit (str): the commit the revision resolved to.
    folder (Path): the cache's folder of that commit. files (Tuple[Path, ...]): the files fetched.
    """

    hub_id: HubId
    commit: str
    folder: Path
    files: Tuple[Path, ...]

    def model_path(self) -> Path:
        """RETURNS (Path): what the loader reads: the one zip where the model is a zip, else the folder."""
        zips = [f for f in self.files if f.suffix.lower() == ".zip"]
        return zips[0] if len(zips) == 1 and len(self.files) == 1 else self.folder


def is_hub_id(text: object) -> bool:
    """RETURNS (bool): whether ``text`` names a model on the Hub (starts with ``hf:``)."""
    return isinstance(text, str) and text.startswith(PREFIX)


def parse_hub_id(text: str) -> HubId:
    """RETURNS (HubId): the repository and revision of ``hf:OWNER/REPO[@REVISION]``; anything else
    is a ModelFileError saying how to write it."""
    body = text[len(PREFIX):] if is_hub_id(text) else text
    repo, _, revision = body.partition("@")
    if not _REPO.fullmatch(repo) or ".." in repo or ("@" in body and not revision.strip()):
        raise ModelFileError(text, "not a Hugging Face Hub id: write hf:OWNER/REPO or hf:OWNER/REPO@REVISION "
                                   "(a branch, tag or commit)")
    return HubId(repo, revision or None)


def fetch_hub(text: str) -> HubSnapshot:
    """The files of the model ``text`` names (``hf:OWNER/REPO[@REVISION]``), from the cache or
    the Hub, verified (see the module docstring).

    RETURNS (HubSnapshot): the commit's folder in the cache and the files in it.
    """
    hub_id = parse_hub_id(text)
    hf = _huggingface_hub()
    cache = hub_cache()
    storage = cache / hf.file_download.repo_folder_name(repo_id=hub_id.repo, repo_type="model")
    if offline():
        return _cached(hub_id, storage)
    endpoint = os.environ.get("HF_ENDPOINT", "").rstrip("/") or hf.constants.ENDPOINT
    try:
        info = hf.HfApi(endpoint=endpoint).model_info(hub_id.repo, revision=hub_id.revision, files_metadata=True)
    except Exception as error:  # huggingface_hub's HTTP, network and not-found errors have no common base
        if not isinstance(error, hf.errors.HfHubHTTPError) and _cached_commit(hub_id, storage) is not None:
            # the Hub not reached at all (no answer, not a refusal): the copy fetched before, checked
            # again, as huggingface_hub itself falls back to its cache
            snapshot = _cached(hub_id, storage)
            note(f"{hub_id}: the Hub at {endpoint} cannot be reached ({_one_line(error)}); using the copy fetched "
                 f"before (commit {snapshot.commit})")
            return snapshot
        raise ModelFileError(str(hub_id), f"the Hub at {endpoint} did not list it: {_one_line(error)}") from None
    wanted = model_files(info.siblings or [], str(hub_id))
    watched = [storage, cache / ".locks" / storage.name, cache / "CACHEDIR.TAG"]
    before = _tree(watched)
    try:
        files = tuple(_download(hf, hub_id, info.sha, sibling, cache, endpoint) for sibling in wanted)
        _write_ref(storage, hub_id.revision or DEFAULT_REVISION, info.sha)
    except BaseException:  # an interrupt too: what this call put in the cache goes with it
        _remove_new(watched, before)
        raise
    return HubSnapshot(hub_id, info.sha, storage / "snapshots" / info.sha, files)


def model_files(siblings: Sequence[Any], where: str) -> List[Any]:
    """The files of a repository (``RepoSibling``s) that hold its model: every file of a spaCy
    pipeline (``config.cfg`` at the top: an ``nlp.to_disk`` folder, its elmo component's weights in
    a folder below), a published pair's two where the top holds one, else every file at the top;
    ``.gitattributes`` and Markdown never.

    RETURNS (List[Any]): the siblings to fetch. A repository with none is a ModelFileError.
    """
    kept = [s for s in siblings if Path(s.rfilename).name not in SKIPPED and not s.rfilename.lower().endswith(".md")]
    if any(s.rfilename == PIPELINE_CONFIG for s in kept):
        return kept
    top = [s for s in kept if "/" not in s.rfilename]
    pair = find_pair((s.rfilename for s in top), where)
    if pair is not None:
        top = [s for s in top if s.rfilename in pair]
    if not top:
        raise ModelFileError(where, "the repository holds no model files at its top (options.json + weights.hdf5, "
                                    "config.json + model.safetensors, or a published zip)")
    return top


def hub_cache() -> Path:
    """RETURNS (Path): huggingface_hub's cache folder: ``$HF_HUB_CACHE``, else ``$HF_HOME/hub``,
    else its default."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser() / "hub"
    return Path(_huggingface_hub().constants.HF_HUB_CACHE)


def offline() -> bool:
    """RETURNS (bool): whether ``HF_HUB_OFFLINE`` (or ``TRANSFORMERS_OFFLINE``) forbids the network."""
    return any(os.environ.get(name, "").strip().upper() in ("1", "ON", "YES", "TRUE")
               for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))


def mismatch(path: Path, size: Optional[int], sha256: Optional[str], blob_id: Optional[str]) -> Optional[str]:
    """Why the file at ``path`` is not the one the Hub states, or None.

    size (Optional[int]): its size in bytes. sha256 (Optional[str]): its SHA-256 (files in LFS).
    blob_id (Optional[str]): its git blob id (files not in LFS).
    RETURNS (Optional[str]): the reason, in words.
    """
    if size is None or (sha256 is None and blob_id is None):
        return "the Hub states no size and digest for it, so it cannot be checked"
    found = path.stat().st_size
    if found != size:
        return f"{found:,} bytes where the Hub states {size:,} (truncated or damaged)"
    if sha256 is not None:
        digest = file_sha256(path)
        return None if digest == sha256 else f"SHA-256 {digest}, not the {sha256} the Hub states (altered or damaged)"
    digest = git_blob_id(path)
    return None if digest == blob_id else f"git blob id {digest}, not the {blob_id} the Hub states (altered or damaged)"


def git_blob_id(path: Path) -> str:
    """RETURNS (str): the file's git blob id (SHA-1 of ``blob SIZE\\0`` and its bytes), as the Hub
    names a file not kept in LFS."""
    digest = hashlib.sha1(f"blob {path.stat().st_size}\0".encode("ascii"))
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _download(hf: Any, hub_id: HubId, commit: str, sibling: Any, cache: Path, endpoint: str) -> Path:
    """One file of ``commit`` into the cache, then checked against what the Hub lists for it. A copy
    already in the cache that no longer matches (damaged on disk since it was fetched) is removed
    and fetched once more, with a line on stderr: huggingface_hub would hand back the same bytes
    on every call, and the link alone removed would be made again to the same blob."""
    name = f"{hub_id}/{sibling.rfilename}"
    lfs = sibling.lfs
    stated = (lfs.size if lfs else sibling.size, lfs.sha256 if lfs else None, None if lfs else sibling.blob_id)
    storage = cache / hf.file_download.repo_folder_name(repo_id=hub_id.repo, repo_type="model")
    blob = stated[1] or stated[2]
    cached = (storage / "snapshots" / commit / sibling.rfilename).exists() or bool(
        blob and (storage / "blobs" / blob).exists())
    path = _hf_download(hf, hub_id, commit, sibling, cache, endpoint)
    problem = mismatch(path, *stated)
    if problem is not None and cached:
        note(f"{name}: the copy in the cache ({path.resolve()}) has {problem}; fetching it again")
        _forget(path)
        path = _hf_download(hf, hub_id, commit, sibling, cache, endpoint)
        problem = mismatch(path, *stated)
    if problem is not None:
        raise ModelFileError(name, f"{problem}; nothing was kept")
    return path


def _hf_download(hf: Any, hub_id: HubId, commit: str, sibling: Any, cache: Path, endpoint: str) -> Path:
    """RETURNS (Path): the file's link in the cache, fetched by huggingface_hub if its blob is not there."""
    try:
        return Path(hf.hf_hub_download(hub_id.repo, sibling.rfilename, revision=commit, cache_dir=str(cache),
                                       endpoint=endpoint))
    except Exception as error:  # as in fetch_hub: HTTP, network, size checks, missing entries
        raise ModelFileError(f"{hub_id}/{sibling.rfilename}",
                             f"could not be downloaded: {_one_line(error)}; nothing was kept") from None


def _forget(path: Path) -> None:
    """Remove a file of the cache: its link and the blob it points at (or the file, where the cache
    holds copies rather than links)."""
    blob = path.resolve()
    path.unlink(missing_ok=True)
    if blob != path:
        blob.unlink(missing_ok=True)


def _cached(hub_id: HubId, storage: Path) -> HubSnapshot:
    """The files of ``hub_id`` fetched earlier, without network: each checked against the digest
    its blob is named by (what the Hub stated when it came)."""
    commit = _cached_commit(hub_id, storage)
    folder = storage / "snapshots" / commit if commit else None
    if folder is None:
        raise ModelFileError(str(hub_id), "not in the Hugging Face cache, and HF_HUB_OFFLINE forbids downloading it; "
                                          f"fetch it once with network (`python -m spacy_elmo download {hub_id}`)")
    files = tuple(sorted(p for p in folder.rglob("*") if p.is_file() or p.is_symlink()))
    for path in files:
        if not path.exists():  # a link whose blob was deleted: left out, the folder would pass as another layout
            raise ModelFileError(path, f"its blob {path.resolve()} is no longer in the cache; with network, "
                                       f"`python -m spacy_elmo download {hub_id}` fetches it again")
        blob = path.resolve().name
        kind = _DIGESTS.get(len(blob))
        if kind is None:
            raise ModelFileError(path, "not a link to a blob named by its digest, so it cannot be checked offline")
        found = file_sha256(path) if kind == "sha256" else git_blob_id(path)
        if found != blob:
            raise ModelFileError(path, f"its {kind} is {found}, not the {blob} it was fetched with (changed since); "
                                       f"with network, `python -m spacy_elmo download {hub_id}` fetches it again")
    return HubSnapshot(hub_id, commit, folder, files)


def _cached_commit(hub_id: HubId, storage: Path) -> Optional[str]:
    """RETURNS (Optional[str]): the commit ``hub_id``'s revision was fetched at, where the cache
    holds its folder, else None."""
    revision = hub_id.revision or DEFAULT_REVISION
    ref = storage / "refs" / revision
    commit = revision if _COMMIT.fullmatch(revision) else (ref.read_text().strip() if ref.is_file() else None)
    return commit if commit and (storage / "snapshots" / commit).is_dir() else None


def _write_ref(storage: Path, revision: str, commit: str) -> None:
    """Note which commit ``revision`` was, as huggingface_hub does, for offline use later."""
    if revision == commit:
        return
    ref = storage / "refs" / revision
    ref.parent.mkdir(parents=True, exist_ok=True)
    ref.write_text(commit)


def _tree(folders: Sequence[Path]) -> Set[Path]:
    """RETURNS (Set[Path]): every path under ``folders`` (and the folders and their parents that exist)."""
    found: Set[Path] = set()
    for folder in folders:
        found.update(p for p in (folder, *folder.parents) if os.path.lexists(p))
        if folder.is_dir():
            found.update(folder.rglob("*"))
    return found


def _remove_new(folders: Sequence[Path], before: Set[Path]) -> None:
    """Remove what is under ``folders`` now and was not in ``before``, deepest first."""
    for path in sorted(_tree(folders) - before, key=lambda p: len(p.parts), reverse=True):
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)


def _one_line(error: BaseException) -> str:
    """An exception's message on one line, without huggingface_hub's request ids and hints."""
    text = " ".join(str(error).split())
    text = re.sub(r"\s*\(Request ID:[^)]*\)", "", text)
    # its advice to force a download again: this call kept nothing, so a plain retry is that
    text = re.sub(r"\s*This is usually due to network issues[^.]*\.\s*Please retry with `force_download=True`\.", "", text)
    return text[:400] or type(error).__name__


def _huggingface_hub() -> Any:
    """huggingface_hub, or a ModelFileError with the line that installs it."""
    try:
        import huggingface_hub
        import huggingface_hub.errors  # noqa: F401 (HfHubHTTPError)
        import huggingface_hub.file_download  # noqa: F401 (repo_folder_name)
    except ImportError:
        raise ModelFileError("hf:", f"models on the Hugging Face Hub need huggingface_hub: {INSTALL}") from None
    return huggingface_hub
