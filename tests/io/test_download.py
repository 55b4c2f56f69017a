"""Published models by name: downloads from a local server that misbehaves on purpose, never the network."""
import hashlib
import json
import pickle
import shutil
import socket
import threading
import urllib.request
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import torch

from spacy_elmo import load_bilm
from spacy_elmo.io import ModelFileError, resolve_bilm, save_bilm
from spacy_elmo.io.download import Transfer, cache_dir, fetch_pair, fetch_published, record_path
from spacy_elmo.io.errors import DownloadError
from spacy_elmo.io.registry import BASE_URL_ENV, PUBLISHED_MODELS

from ..conftest import TINY, load_tiny_bilm

OPTIONS = (TINY / "options.json").read_bytes()
WEIGHTS = (TINY / "weights.hdf5").read_bytes()
SMALL = PUBLISHED_MODELS["small"]
OPTIONS_PATH = f"{SMALL.shape}/elmo_{SMALL.shape}_options.json"
WEIGHTS_PATH = f"{SMALL.shape}/elmo_{SMALL.shape}_weights.hdf5"
FAST = dict(retries=3, retry_wait=0.0, timeout=5.0)


class FixtureServer:
    """Files on 127.0.0.1 (port 0) over HTTP, with faults on request.

    files: path -> bytes. faults: path -> faults for the next requests, one each, in order.
    always: path -> a fault for every request. requests: (path, Range header) as received.
    Faults: "drop" (half the body, then the connection closes), "truncate" (half the file, with
    a matching Content-Length), "alter" (one byte changed), "404", "500", "ignore-range" (200 and
    the whole file whatever the Range).
    """

    def __init__(self) -> None:
        self.files, self.faults, self.always, self.requests = {}, {}, {}, []
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self.httpd.daemon_threads = True
        self.httpd.fixture = self
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.02,), daemon=True)
        self.thread.start()

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/"

    def publish_small(self) -> None:
        """The tiny fixture pair where the published "small" model lives below ``base``."""
        self.files.update({OPTIONS_PATH: OPTIONS, WEIGHTS_PATH: WEIGHTS})

    def count(self, path: str) -> int:
        return sum(1 for p, _ in self.requests if p == path)

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        fixture, path, ranged = self.server.fixture, self.path.lstrip("/"), self.headers.get("Range")
        fixture.requests.append((path, ranged))
        queued = fixture.faults.get(path)
        fault = queued.pop(0) if queued else fixture.always.get(path)
        if path not in fixture.files or fault in ("404", "500"):
            self.send_error(500 if fault == "500" else 404)
            return
        data = bytearray(fixture.files[path])
        if fault == "truncate":
            data = data[: len(data) // 2]
        if fault == "alter":
            data[len(data) // 2] ^= 0xFF
        start = int(ranged.split("=")[1].split("-")[0]) if ranged and fault != "ignore-range" else 0
        body = bytes(data[start:])
        self.send_response(206 if start else 200)
        self.send_header("Content-Length", str(len(body)))
        if start:
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        self.end_headers()
        if fault == "drop":
            self.wfile.write(body[: len(body) // 2])
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture()
def server(monkeypatch, tmp_path):
    """A fixture server the registry's names point at, and a cache in the test's directory."""
    fixture = FixtureServer()
    monkeypatch.setenv(BASE_URL_ENV, fixture.base)
    monkeypatch.setenv("SPACY_ELMO_CACHE", str(tmp_path / "cache"))
    yield fixture
    fixture.close()


def _closed_port_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}/"


def _same_weights(a, b) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


def test_registry_lists_allennlp_urls_and_parameter_counts():
    urls = {name: (m.options_url(), m.weights_url()) for name, m in PUBLISHED_MODELS.items()}
    base = "https://allennlp.s3.amazonaws.com/models/elmo/"
    assert urls["original-5.5b"] == (
        base + "2x4096_512_2048cnn_2xhighway_5.5B/elmo_2x4096_512_2048cnn_2xhighway_5.5B_options.json",
        base + "2x4096_512_2048cnn_2xhighway_5.5B/elmo_2x4096_512_2048cnn_2xhighway_5.5B_weights.hdf5",
    )
    assert urls["small"][1] == base + "2x1024_128_2048cnn_1xhighway/elmo_2x1024_128_2048cnn_1xhighway_weights.hdf5"
    shapes = {name: (m.shape, m.parameters) for name, m in PUBLISHED_MODELS.items()}
    assert shapes == {
        "small": ("2x1024_128_2048cnn_1xhighway", 13.6),
        "medium": ("2x2048_256_2048cnn_1xhighway", 28.0),
        "original": ("2x4096_512_2048cnn_2xhighway", 93.6),
        "original-5.5b": ("2x4096_512_2048cnn_2xhighway_5.5B", 93.6),
    }


def test_cache_dir_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("SPACY_ELMO_CACHE", str(tmp_path / "mine"))
    assert cache_dir() == tmp_path / "mine"
    monkeypatch.delenv("SPACY_ELMO_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "spacy_elmo"


def test_load_by_name_downloads_once_verifies_and_records(server, tmp_path, capsys, monkeypatch):
    server.publish_small()
    monkeypatch.setattr(pickle, "loads", lambda *a, **k: pytest.fail("unpickled"))
    bilm = load_bilm("small", optimize=False)
    assert _same_weights(bilm, load_tiny_bilm())
    folder = tmp_path / "cache" / "small"
    assert (folder / "weights.hdf5").read_bytes() == WEIGHTS and not list(folder.glob("*.part"))
    record = json.loads(record_path(folder / "weights.hdf5").read_text())
    assert record["sha256"] == hashlib.sha256(WEIGHTS).hexdigest() and record["url"].endswith(WEIGHTS_PATH)
    assert "weights.hdf5: 0.2 of 0.2 MB" in capsys.readouterr().err  # the progress line
    server.files.clear()  # from the cache from now on: no request
    assert _same_weights(resolve_bilm("small"), bilm) and len(server.requests) == 2


def test_dropped_connection_resumes_with_a_range_request(server):
    server.publish_small()
    server.faults[WEIGHTS_PATH] = ["drop", "drop"]
    _, weights = fetch_published("small", transfer=Transfer(**FAST))
    assert weights.read_bytes() == WEIGHTS
    ranges = [r for p, r in server.requests if p == WEIGHTS_PATH]
    first = len(WEIGHTS) // 2
    assert ranges == [None, f"bytes={first}-", f"bytes={first + (len(WEIGHTS) - first) // 2}-"]


def test_part_left_by_an_earlier_run_is_resumed_and_a_wrong_one_fetched_again(server, tmp_path):
    server.publish_small()
    folder = tmp_path / "cache" / "small"
    folder.mkdir(parents=True)
    (folder / "weights.hdf5.part").write_bytes(WEIGHTS[:1000])
    assert fetch_published("small", transfer=Transfer(**FAST))[1].read_bytes() == WEIGHTS
    assert [r for p, r in server.requests if p == WEIGHTS_PATH] == ["bytes=1000-"]
    # a part from another file: the whole fails its check, so it is fetched once more from the start
    (folder / "weights.hdf5").unlink()
    (folder / "weights.hdf5.part").write_bytes(b"x" * 1000)
    assert fetch_published("small", transfer=Transfer(**FAST))[1].read_bytes() == WEIGHTS
    assert [r for p, r in server.requests if p == WEIGHTS_PATH][1:] == ["bytes=1000-", None]


def test_server_ignoring_range_restarts_from_zero(server):
    server.publish_small()
    server.faults[WEIGHTS_PATH] = ["drop", "ignore-range"]
    _, weights = fetch_published("small", transfer=Transfer(**FAST))
    assert weights.read_bytes() == WEIGHTS and server.count(WEIGHTS_PATH) == 2


def test_connection_that_keeps_dropping_gives_up_after_the_retries(server, tmp_path):
    server.publish_small()
    server.always[WEIGHTS_PATH] = "drop"
    with pytest.raises(DownloadError, match=r"gave up after 4 attempts.*nothing was put in place"):
        fetch_published("small", transfer=Transfer(**FAST))
    assert server.count(WEIGHTS_PATH) == 4 and not (tmp_path / "cache" / "small" / "weights.hdf5").exists()


def test_truncated_file_is_refused_and_never_put_in_place(server, tmp_path):
    server.publish_small()
    server.always[WEIGHTS_PATH] = "truncate"
    with pytest.raises(DownloadError, match=r"weights.hdf5: the file received is not usable.*HDF5") as err:
        fetch_published("small", transfer=Transfer(**FAST))
    assert err.value.url == server.base + WEIGHTS_PATH
    assert list((tmp_path / "cache" / "small").glob("weights*")) == []


def test_altered_file_fails_the_known_checksum(server, tmp_path):
    server.publish_small()
    server.always[WEIGHTS_PATH] = "alter"
    known = {"small": replace(SMALL, weights_sha256=hashlib.sha256(WEIGHTS).hexdigest())}
    with pytest.raises(DownloadError, match="not the published"):
        fetch_published("small", models=known, transfer=Transfer(**FAST))
    assert not (tmp_path / "cache" / "small" / "weights.hdf5").exists()
    del server.always[WEIGHTS_PATH]
    assert fetch_published("small", models=known, transfer=Transfer(**FAST))[1].read_bytes() == WEIGHTS


def test_cached_file_changed_since_download_is_fetched_again(server, tmp_path, capsys):
    server.publish_small()
    _, weights = fetch_published("small", transfer=Transfer(**FAST))
    data = bytearray(weights.read_bytes())
    data[len(data) // 2] ^= 0xFF
    weights.write_bytes(bytes(data))
    assert _same_weights(load_bilm("small", optimize=False), load_tiny_bilm())
    assert server.count(WEIGHTS_PATH) == 2 and "changed since it was downloaded" in capsys.readouterr().err


def test_not_found_is_final_and_a_passing_server_error_is_retried(server):
    server.publish_small()
    server.faults[OPTIONS_PATH] = ["404"]
    with pytest.raises(DownloadError, match=r"HTTP 404.*options.json.*weights.hdf5"):
        fetch_published("small", transfer=Transfer(**FAST))
    assert server.count(OPTIONS_PATH) == 1
    server.faults[WEIGHTS_PATH] = ["500", "500"]
    assert fetch_published("small", transfer=Transfer(**FAST))[1].read_bytes() == WEIGHTS
    assert server.count(WEIGHTS_PATH) == 3


def test_server_error_that_persists_ends_in_a_clear_error(server):
    server.publish_small()
    server.always[OPTIONS_PATH] = "500"
    with pytest.raises(DownloadError, match=r"HTTP 500"):
        fetch_published("small", transfer=Transfer(**FAST))
    assert server.count(OPTIONS_PATH) == 4


def test_offline_error_names_the_urls_and_where_to_place_the_files(monkeypatch, tmp_path, tiny_paths):
    monkeypatch.setenv(BASE_URL_ENV, _closed_port_url())
    monkeypatch.setenv("SPACY_ELMO_CACHE", str(tmp_path / "cache"))
    with pytest.raises(DownloadError, match="cannot reach the server") as err:
        load_bilm("original")
    message = str(err.value)
    for placed in ("original/options.json", "original/weights.hdf5", "elmo_2x4096_512_2048cnn_2xhighway_weights.hdf5"):
        assert placed in message
    # local files need no network
    monkeypatch.setattr(urllib.request, "urlopen", lambda *a, **k: pytest.fail("network used"))
    save_bilm(load_tiny_bilm(), tmp_path / "model")
    assert _same_weights(load_bilm(tmp_path / "model", optimize=False), resolve_bilm(options=tiny_paths[0],
                                                                                    weights=tiny_paths[1]))


def test_files_placed_by_hand_are_checked_once_and_recorded(monkeypatch, tmp_path, tiny_paths):
    monkeypatch.setenv(BASE_URL_ENV, _closed_port_url())
    monkeypatch.setenv("SPACY_ELMO_CACHE", str(tmp_path / "cache"))
    folder = tmp_path / "cache" / "medium"
    folder.mkdir(parents=True)
    shutil.copy(tiny_paths[0], folder / "options.json")
    (folder / "weights.hdf5").write_bytes(WEIGHTS[: len(WEIGHTS) // 2])
    with pytest.raises(ModelFileError, match=r"medium/weights.hdf5: not a readable HDF5"):
        load_bilm("medium")
    assert (folder / "weights.hdf5").exists()  # a file placed by hand is refused, not removed
    shutil.copy(tiny_paths[1], folder / "weights.hdf5")
    assert _same_weights(load_bilm("medium", optimize=False), load_tiny_bilm())
    assert json.loads(record_path(folder / "weights.hdf5").read_text())["sha256"] == hashlib.sha256(WEIGHTS).hexdigest()


def test_unknown_name_lists_the_published_names_and_a_directory_wins(monkeypatch, tmp_path):
    monkeypatch.setattr(urllib.request, "urlopen", lambda *a, **k: pytest.fail("network used"))
    with pytest.raises(ModelFileError, match=r"not found.*small, medium, original, original-5.5b"):
        resolve_bilm("smal")
    save_bilm(load_tiny_bilm(), tmp_path / "small")
    monkeypatch.chdir(tmp_path)
    assert _same_weights(resolve_bilm("small"), load_tiny_bilm())


def test_any_published_pair_by_url(server, tmp_path):
    server.files.update({"a/o.json": OPTIONS, "a/w.hdf5": WEIGHTS})
    options, weights = fetch_pair(server.base + "a/o.json", server.base + "a/w.hdf5", tmp_path / "pair")
    assert options.read_bytes() == OPTIONS and weights.read_bytes() == WEIGHTS
    with pytest.raises(ValueError, match="not an http"):
        fetch_pair("o.json", "w.hdf5", tmp_path / "pair")
    # weights that do not match the options are refused
    other = json.loads(OPTIONS)
    other["lstm"]["dim"] = 32
    server.files["a/other.json"] = json.dumps(other).encode()
    with pytest.raises(DownloadError, match="options do not match"):
        fetch_pair(server.base + "a/other.json", server.base + "a/w.hdf5", tmp_path / "other")
