"""Published biLM files fetched over HTTP once, verified, and read from a cache from then on.

Only the standard library (urllib). A file is streamed to ``NAME.part`` beside its place, resumed
with a Range request after a dropped connection (a server that ignores Range and answers 200 is
read again from the start; a download that fails or is interrupted removes its part, and the
folder it made if that stays empty), checked (the length the server announced; the options parse; the
HDF5 weights load through ``load_allennlp``, with every dataset and shape the options imply; the
SHA-256 where the registry knows it) and only then renamed into place with ``os.replace``. Its
SHA-256 is written beside it (``NAME.sha256.json``, ``download_record``) and compared on every
later use: a download that was changed or damaged since is fetched again, a file placed by hand
(or whose record was deleted) is checked once, first against the shape and size the registry gives
its name (``published_shape``), and recorded with a line saying so, and a damaged record is refused. Nothing downloads unless a published model is asked for by name or URL; nothing is
unpickled.

Files come over https. Plain http, where anyone on the way can change the file, is used only
where the user allows it (``allow_http=True``, ``download --allow-http``, ``$SPACY_ELMO_ALLOW_HTTP``)
or the registry marks a model as served over http alone, and then with a warning; a redirect from
https to http is refused whatever was allowed.
"""
import hashlib
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import warnings
from contextlib import suppress
from dataclasses import dataclass, field
from functools import partial
from http.client import HTTPException, HTTPResponse
from pathlib import Path
from typing import IO, List, Mapping, Optional, Tuple

from ..files import cache_dir, file_sha256
from .allennlp import load_allennlp, read_options
from .errors import DownloadError, ModelFileError
from .download_record import CHUNK_BYTES, PART_SUFFIX, Check, intact, note, record_path, write_record
from .published_shape import check_placed_options, check_placed_weights
from .registry import PublishedModel, published_model

__all__ = ["Transfer", "ensure_file", "fetch_pair", "fetch_published", "file_sha256", "record_path", "url_pair_dir"]

# "1" allows plain http where no argument can be passed (``load_bilm(NAME)``, a training config)
ALLOW_HTTP_ENV = "SPACY_ELMO_ALLOW_HTTP"
OPTIONS_NAME = "options.json"
WEIGHTS_NAME = "weights.hdf5"
USER_AGENT = "spacy-elmo (urllib)"
# answers worth asking again: the server may be busy or restarting
RETRY_STATUSES = {408, 425, 429, 500, 502, 503, 504}


@dataclass
class Transfer:
    """How files are fetched.

    retries (int): attempts after the first, for a dropped connection or a passing server error.
    retry_wait (float): seconds before the first retry, doubled for each one after it.
    timeout (float): seconds a connection may stay silent before it counts as dropped.
    progress (Optional[IO[str]]): where the progress line goes (default: stderr; None: quiet).
    """

    retries: int = 4
    retry_wait: float = 1.0
    timeout: float = 60.0
    progress: Optional[IO[str]] = field(default_factory=lambda: sys.stderr)


class _Transient(Exception):
    """A failure that another attempt, resuming where this one stopped, may get past."""


class _Unreachable(_Transient):
    """No answer from the server at all: worth another attempt only if it answered before."""


class _Refused(Exception):
    """An answer that asking again will not change (404, 403, ...)."""


def fetch_published(
    name: str,
    *,
    directory: Optional[Path] = None,
    models: Optional[Mapping[str, PublishedModel]] = None,
    base_url: Optional[str] = None,
    transfer: Optional[Transfer] = None,
    allow_http: bool = False,
) -> Tuple[Path, Path]:
    """The options and weights of the published model ``name``, downloaded unless already there.

    directory (Optional[Path]): where the two files go (default: ``cache_dir() / name``).
    models (Optional[Mapping[str, PublishedModel]]): the table of names (default: the registry).
    base_url (Optional[str]): the server the files are below (default: ``models_base_url()``).
    transfer (Optional[Transfer]): retries, timeout and progress output.
    allow_http (bool): download over plain http too (with a warning); always so for a model the
        registry marks ``http_only``.
    RETURNS (Tuple[Path, Path]): options.json and weights.hdf5, verified.
    """
    model = published_model(name, models)
    return fetch_pair(
        model.options_url(base_url),
        model.weights_url(base_url),
        Path(directory) if directory is not None else cache_dir() / model.name,
        options_sha256=model.options_sha256,
        weights_sha256=model.weights_sha256,
        transfer=transfer,
        allow_http=allow_http or model.http_only,
        published=model,
    )


def url_pair_dir(options_url: str, weights_url: str) -> Path:
    """RETURNS (Path): the cache directory of a published pair given by its URLs."""
    key = hashlib.sha256(f"{options_url}\n{weights_url}".encode("utf-8")).hexdigest()[:16]
    return cache_dir() / "urls" / key


def fetch_pair(
    options_url: str,
    weights_url: str,
    directory: Path,
    *,
    options_sha256: Optional[str] = None,
    weights_sha256: Optional[str] = None,
    transfer: Optional[Transfer] = None,
    allow_http: bool = False,
    published: Optional[PublishedModel] = None,
) -> Tuple[Path, Path]:
    """A published options + weights pair in ``directory`` as options.json and weights.hdf5,
    downloaded unless already there (see ``ensure_file``); the weights are checked against the options.

    options_sha256, weights_sha256 (Optional[str]): the files' known SHA-256, if any.
    allow_http (bool): download over plain http too (see ``ensure_file``).
    published (Optional[PublishedModel]): the registry's entry the pair is: a file placed by hand
        must have its shape and size (``published_shape``) before it is recorded.
    RETURNS (Tuple[Path, Path]): the two files.
    """
    for url in (options_url, weights_url):
        if urllib.parse.urlsplit(url).scheme.lower() not in ("http", "https"):
            raise ValueError(f"{url}: not an http(s) URL; give a local file as a path instead")
    directory = Path(directory)
    placed_options = placed_weights = None
    if published is not None:
        known = dict(name=published.name, shape=published.shape)
        placed_options = partial(check_placed_options, **known)
        placed_weights = partial(check_placed_weights, **known, size_mb=published.size_mb)
    try:
        options = ensure_file(options_url, directory / OPTIONS_NAME, sha256=options_sha256, check=read_options,
                              placed=placed_options, transfer=transfer, allow_http=allow_http)
    except DownloadError as err:  # name both files for whoever places them by hand
        raise DownloadError(err.url, err.path, err.reason, also=[(weights_url, directory / WEIGHTS_NAME)]) from err
    weights = ensure_file(weights_url, directory / WEIGHTS_NAME, sha256=weights_sha256,
                          check=lambda path: load_allennlp(options, path), placed=placed_weights,
                          transfer=transfer, allow_http=allow_http)
    return options, weights


def ensure_file(
    url: str,
    target: Path,
    *,
    sha256: Optional[str] = None,
    check: Optional[Check] = None,
    placed: Optional[Check] = None,
    transfer: Optional[Transfer] = None,
    allow_http: bool = False,
) -> Path:
    """The file at ``target``, verified: downloaded from ``url`` if missing or changed since its download.

    sha256 (Optional[str]): the digest the file must have, if known.
    check (Optional[Callable[[Path], object]]): reads a file, raising ``ModelFileError`` if it is not
        usable; run on each download and on a file placed by hand before it is first used.
    placed (Optional[Callable[[Path], str]]): compares a file placed by hand (no record beside it)
        with what the registry knows of its name, before ``check`` and before it is recorded
        (``download_record.intact``).
    allow_http (bool): download an ``http://`` URL (with a warning) rather than refuse it; also
        allowed by ``$SPACY_ELMO_ALLOW_HTTP=1``. A file already in place needs no network, so no
        permission either. A redirect from https to http is refused regardless.
    RETURNS (Path): ``target``. A download that fails leaves nothing behind: no partial file, and
        no folder that was made for it and stayed empty.
    """
    target = Path(target)
    if target.is_file() and intact(target, url, sha256, check, placed):
        return target
    _check_scheme(url, target, allow_http)
    made = _make_folders(target.parent)
    try:
        return _download(url, target, sha256, check, transfer or Transfer())
    except BaseException:  # an interrupt too: the folders made for this download go with it
        for folder in reversed(made):
            with suppress(OSError):  # not empty (what another download put there), or gone
                folder.rmdir()
        raise


def _make_folders(folder: Path) -> List[Path]:
    """Create ``folder`` and the folders above it that are missing. RETURNS (List[Path]): those it
    made, outermost first."""
    missing = [path for path in (folder, *folder.parents) if not path.exists()][::-1]
    folder.mkdir(parents=True, exist_ok=True)
    return missing


def _check_scheme(url: str, target: Path, allow_http: bool) -> None:
    """Refuse a plain-http download unless it was allowed, and warn when it was."""
    if urllib.parse.urlsplit(url).scheme.lower() != "http":
        return
    if not (allow_http or os.environ.get(ALLOW_HTTP_ENV) == "1"):
        raise DownloadError(
            url, target, "refusing plain http, where anyone on the way can change the file: give an "
            f"https URL, or allow http explicitly (allow_http=True, `download --allow-http`, or {ALLOW_HTTP_ENV}=1)"
        )
    warnings.warn(
        f"{url}: downloading over plain http, which is not encrypted; the file is checked against a "
        "known SHA-256 only where the registry has one",
        RuntimeWarning,
        stacklevel=3,
    )


def _download(url: str, target: Path, sha256: Optional[str], check: Optional[Check], transfer: Transfer) -> Path:
    """Download ``url`` to ``target`` through ``target.part``, verify it and move it into place.

    A download that was resumed and then fails verification is fetched once more from the start
    (the earlier part may have been a different file); any other failure raises ``DownloadError``.
    RETURNS (Path): ``target``, with its SHA-256 recorded beside it.
    """
    part = target.with_name(target.name + PART_SUFFIX)
    try:
        for _ in range(2):
            resumed = _fetch(url, part, target, transfer)
            digest, problem = _verify(part, sha256, check)
            if problem is None:
                os.replace(part, target)
                write_record(target, url, digest)
                return target
            part.unlink()
            if not resumed:
                break
    finally:  # failed or interrupted: no partial file stays (one left by a killed process is resumed)
        part.unlink(missing_ok=True)
    raise DownloadError(url, target, problem)


def _verify(part: Path, sha256: Optional[str], check: Optional[Check]) -> Tuple[str, Optional[str]]:
    """RETURNS (Tuple[str, Optional[str]]): the file's SHA-256, and what is wrong with it (None: nothing)."""
    digest = file_sha256(part)
    if sha256 is not None and digest != sha256:
        return digest, f"the file received has SHA-256 {digest}, not the published {sha256} (altered or damaged)"
    try:
        if check is not None:
            check(part)
    except ModelFileError as err:
        return digest, f"the file received is not usable: {err.problem}"
    return digest, None


def _fetch(url: str, part: Path, target: Path, transfer: Transfer) -> bool:
    """Bring ``part`` to the whole file, resuming after dropped connections, up to ``transfer.retries``
    times. RETURNS (bool): whether it was resumed (an earlier run's part, or a dropped connection),
    so that it may hold bytes of another version of the file."""
    resumed = part.is_file() and part.stat().st_size > 0
    answered = False
    failures = 0
    while True:
        try:
            _get(url, part, transfer)
            return resumed
        except _Refused as err:
            raise DownloadError(url, target, str(err)) from err
        except _Transient as err:
            if isinstance(err, _Unreachable) and not answered:
                raise DownloadError(url, target, f"cannot reach the server ({err})") from err
            answered = answered or not isinstance(err, _Unreachable)
            failures += 1
            if failures > transfer.retries:
                raise DownloadError(url, target, f"gave up after {failures} attempts; the last: {err}") from err
            note(f"{url}: {err}; trying again")
            resumed = True
            time.sleep(transfer.retry_wait * 2 ** (failures - 1))


def _get(url: str, part: Path, transfer: Transfer) -> None:
    """One request: the rest of the file from the end of ``part`` (all of it if the server ignores Range)."""
    offset = part.stat().st_size if part.is_file() else 0
    headers = {"User-Agent": USER_AGENT, **({"Range": f"bytes={offset}-"} if offset else {})}
    opener = urllib.request.build_opener(_NoDowngradeRedirect)
    try:
        response = opener.open(urllib.request.Request(url, headers=headers), timeout=transfer.timeout)
    except urllib.error.HTTPError as err:
        if err.code == 416:  # the part is no prefix of the server's file
            part.unlink()
            raise _Transient("the partial file does not fit the server's (HTTP 416); starting again") from err
        if err.code in RETRY_STATUSES:
            raise _Transient(f"HTTP {err.code} {err.reason}") from err
        raise _Refused(f"the server answered HTTP {err.code} {err.reason}") from err
    except (urllib.error.URLError, OSError) as err:
        raise _Unreachable(str(getattr(err, "reason", err))) from err
    with response:
        start, total = _extent(response)
        if start != offset and start != 0:
            part.unlink()
            raise _Transient(f"the server sent bytes from {start}, not {offset}; starting again")
        _stream(response, part, start, total, transfer)


class _NoDowngradeRedirect(urllib.request.HTTPRedirectHandler):
    """urllib's redirects, except from https to http: the file would then come unencrypted
    from wherever the redirect points."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):  # noqa: ANN001 (urllib's signature)
        # urllib has made ``newurl`` absolute by now
        scheme = urllib.parse.urlsplit(newurl).scheme
        if urllib.parse.urlsplit(req.full_url).scheme == "https" and scheme != "https":
            fp.close()
            raise _Refused(
                f"the server redirected {req.full_url} to {newurl}, from https to {scheme}; refusing "
                "the downgrade (ask the server's owner for an https location, or download the file elsewhere)"
            )
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def _extent(response: HTTPResponse) -> Tuple[int, Optional[int]]:
    """RETURNS (Tuple[int, Optional[int]]): where the body starts in the file, and the file's full
    length where the server says it (206: Content-Range; 200: Content-Length, the whole file)."""
    length = response.headers.get("Content-Length")
    if response.status != 206:
        return 0, int(length) if length is not None else None
    content_range = response.headers.get("Content-Range", "")  # "bytes START-END/TOTAL"
    try:
        span, total = content_range.split(" ", 1)[1].split("/")
        start = int(span.split("-")[0])
    except (IndexError, ValueError):
        return -1, None  # unreadable: counts as the wrong range
    if total.strip() != "*":
        return start, int(total)
    return start, start + int(length) if length is not None else None


def _stream(response: HTTPResponse, part: Path, start: int, total: Optional[int], transfer: Transfer) -> None:
    """Write the body to ``part`` from byte ``start`` (0: truncating what was there), with progress."""
    progress = _Progress(part.name[: -len(PART_SUFFIX)], total, start, transfer.progress)
    done = start
    try:
        with part.open("ab" if start else "wb") as out:
            while True:
                try:
                    chunk = response.read(CHUNK_BYTES)
                except (HTTPException, OSError) as err:
                    raise _Transient(f"connection lost after {done:,} bytes ({type(err).__name__})") from err
                if not chunk:
                    break
                out.write(chunk)
                done += len(chunk)
                progress.update(done)
    finally:
        progress.close(done)
    if total is not None and done < total:
        raise _Transient(f"connection closed after {done:,} of {total:,} bytes")
    if total is not None and done > total:
        part.unlink()
        raise _Transient(f"received {done:,} bytes where the server announced {total:,}; starting again")


class _Progress:
    """One progress line on a stream (bytes, rate, time left): redrawn in place on a terminal,
    a line every 10 s elsewhere (logs), and always a last one."""

    def __init__(self, name: str, total: Optional[int], start: int, stream: Optional[IO[str]]) -> None:
        self.name, self.total, self.start, self.stream = name, total, start, stream
        self.tty = stream is not None and stream.isatty()
        self.began = self.shown = time.monotonic()

    def update(self, done: int) -> None:
        if self.stream is not None and time.monotonic() - self.shown >= (0.5 if self.tty else 10.0):
            self._show(done, final=False)

    def close(self, done: int) -> None:
        if self.stream is not None:
            self._show(done, final=True)

    def _show(self, done: int, *, final: bool) -> None:
        self.shown = now = time.monotonic()
        rate = (done - self.start) / max(now - self.began, 1e-6)
        line = f"{self.name}: {done / 1e6:,.1f}"
        if self.total:
            left = (self.total - done) / rate if rate > 0 else 0.0
            line += f" of {self.total / 1e6:,.1f} MB, {rate / 1e6:,.1f} MB/s, {_clock(left)} left"
        else:
            line += f" MB, {rate / 1e6:,.1f} MB/s"
        end = "\n" if final or not self.tty else ""
        self.stream.write(("\r" + line.ljust(72) if self.tty else line) + end)
        self.stream.flush()


def _clock(seconds: float) -> str:
    minutes, secs = divmod(int(seconds + 0.5), 60)
    return f"{minutes // 60}:{minutes % 60:02d}:{secs:02d}"
