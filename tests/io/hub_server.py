"""A Hugging Face Hub on 127.0.0.1: the routes huggingface_hub downloads a model by, for the tests
of ``hf:`` ids (``HF_ENDPOINT`` points at it).

``GET /api/models/OWNER/REPO[/revision/REV]`` lists a repository's files with their sizes and
digests as the Hub does (``siblings``: ``blobId``, ``size``, and ``lfs`` with the SHA-256 of a
file kept in LFS); ``HEAD``/``GET /OWNER/REPO/resolve/REV/FILE`` serve a file with the Hub's
headers (``X-Repo-Commit``, ``ETag``, ``X-Linked-Etag`` and ``X-Linked-Size`` for LFS). What is
listed is always the true file; what is served may be altered on purpose (``faults``).
"""
import hashlib
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Dict, List, Tuple
from urllib.parse import unquote, urlsplit

LFS_SUFFIXES = (".hdf5", ".safetensors", ".zip")
# what is served instead of a file: its bytes with one changed, the first half (with a matching
# Content-Length: the stated size is the listing's), or nothing (404, as for a file removed)
FAULTS = ("wrong-checksum", "truncated", "missing")


def git_blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class HubServer:
    """Repositories on a local Hub: ``repos[REPO] = {FILE: bytes}`` at one commit each
    (``commits[REPO]``), every branch and tag resolving to it; ``faults[(REPO, FILE)]`` one of
    ``FAULTS``; ``requests`` the (method, path) of each request received."""

    def __init__(self) -> None:
        self.repos: Dict[str, Dict[str, bytes]] = {}
        self.commits: Dict[str, str] = {}
        self.faults: Dict[Tuple[str, str], str] = {}
        self.requests: List[Tuple[str, str]] = []
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self.httpd.hub = self  # type: ignore[attr-defined]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def add(self, repo: str, files: Dict[str, bytes]) -> str:
        """Publish ``files`` as ``repo``. RETURNS (str): its commit."""
        self.repos[repo] = dict(files)
        self.commits[repo] = hashlib.sha1(repo.encode() + b"".join(sorted(files.values()))).hexdigest()
        return self.commits[repo]

    def listing(self, repo: str) -> dict:
        siblings = []
        for name, data in sorted(self.repos[repo].items()):
            sibling = {"rfilename": name, "size": len(data), "blobId": git_blob_id(data)}
            if name.endswith(LFS_SUFFIXES):
                sibling["lfs"] = {"size": len(data), "sha256": hashlib.sha256(data).hexdigest(), "pointerSize": 132}
            siblings.append(sibling)
        return {"id": repo, "modelId": repo, "sha": self.commits[repo], "private": False, "siblings": siblings}

    def __enter__(self) -> "HubServer":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, *args) -> None:  # quiet
        pass

    def do_GET(self) -> None:
        self._answer(body=True)

    def do_HEAD(self) -> None:
        self._answer(body=False)

    def _answer(self, body: bool) -> None:
        hub: HubServer = self.server.hub  # type: ignore[attr-defined]
        path = unquote(urlsplit(self.path).path)
        hub.requests.append((self.command, path))
        listing = re.fullmatch(r"/api/models/([^/]+/[^/]+)(?:/revision/[^/]+)?", path)
        if listing:
            repo = listing.group(1)
            if repo not in hub.repos:
                return self._error(404, "RepoNotFound", f"Repository Not Found for url: {self.path}.")
            return self._send(200, json.dumps(hub.listing(repo)).encode(), {"Content-Type": "application/json"}, body)
        resolve = re.fullmatch(r"/([^/]+/[^/]+)/resolve/([^/]+)/(.+)", path)
        if not resolve or resolve.group(1) not in hub.repos:
            return self._error(404, "RepoNotFound", "Repository Not Found")
        repo, name = resolve.group(1), resolve.group(3)
        commit = hub.commits[repo]
        data = hub.repos[repo].get(name)
        fault = hub.faults.get((repo, name))
        if data is None or fault == "missing":
            return self._error(404, "EntryNotFound", f"Entry Not Found for url: {self.path}.", commit)
        headers = {"X-Repo-Commit": commit, "Accept-Ranges": "bytes"}
        if name.endswith(LFS_SUFFIXES):
            headers.update({"X-Linked-Etag": f'"{hashlib.sha256(data).hexdigest()}"', "X-Linked-Size": str(len(data)),
                            "ETag": f'"{git_blob_id(b"pointer " + data[:16])}"'})
        else:
            headers["ETag"] = f'"{git_blob_id(data)}"'
        served = data
        if fault == "wrong-checksum":
            served = data[:-1] + bytes([data[-1] ^ 0xFF])
        elif fault == "truncated":
            served = data[: len(data) // 2]
        if not body:  # HEAD: the stated size, whatever GET sends
            headers["Content-Length"] = str(len(data))
            return self._send(200, b"", headers, False)
        self._send(200, served, headers, True)

    def _error(self, code: int, kind: str, message: str, commit: str = "") -> None:
        headers = {"X-Error-Code": kind, "X-Error-Message": message, "Content-Type": "application/json"}
        if commit:
            headers["X-Repo-Commit"] = commit
        self._send(code, json.dumps({"error": message}).encode(), headers, self.command != "HEAD")

    def _send(self, code: int, data: bytes, headers: Dict[str, str], body: bool) -> None:
        self.send_response(code)
        for key, value in headers.items():
            self.send_header(key, value)
        if "Content-Length" not in headers:
            self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if body:
            self.wfile.write(data)
