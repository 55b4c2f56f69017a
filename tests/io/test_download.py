"""Published models by name: downloads from a local server that misbehaves on purpose, never the network."""
import hashlib
import json
import pickle
import re
import shutil
import socket
import ssl
import subprocess
import threading
import urllib.request
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Optional

import pytest
import torch

from spacy_elmo import load_bilm
from spacy_elmo.bilm import BiLM, BiLMConfig
from spacy_elmo.io import ModelFileError, save_bilm
from spacy_elmo.io.download import ALLOW_HTTP_ENV, Transfer, fetch_pair, fetch_published, record_path
from spacy_elmo.io.errors import DownloadError
from spacy_elmo.io.published_shape import PublishedShape
from spacy_elmo.io.registry import BASE_URL_ENV, DEFAULT_BASE_URL, PUBLISHED_MODELS, PublishedModel

from ..conftest import TINY, load_tiny_bilm

ROOT = Path(__file__).parents[2]

OPTIONS = (TINY / "options.json").read_bytes()
WEIGHTS = (TINY / "weights.hdf5").read_bytes()
SMALL = PUBLISHED_MODELS["small"]
OPTIONS_PATH = f"{SMALL.shape}/elmo_{SMALL.shape}_options.json"
WEIGHTS_PATH = f"{SMALL.shape}/elmo_{SMALL.shape}_weights.hdf5"
# the tiny fixture pair as a published model of its own shape (2 layers of 64 cells, projection 16,
# 32 filters, 1 highway layer; 0.2 MB of float32 parameters), for files placed by hand that must fit
TINY_MODEL = PublishedModel("tiny", "2x64_16_32cnn_1xhighway", 0.0, 0.2, "random weights", "the tests' fixture")
FAST = dict(retries=3, retry_wait=0.0, timeout=5.0)
# the fixture server speaks plain http, which every test of it allows unless it says otherwise
pytestmark = pytest.mark.filterwarnings("ignore:.*downloading over plain http:RuntimeWarning")


class FixtureServer:
    """Files on 127.0.0.1 (port 0) over HTTP (or HTTPS with ``tls``), with faults on request.

    files: path -> bytes. faults: path -> faults for the next requests, one each, in order.
    always: path -> a fault for every request. requests: (path, Range header) as received.
    redirects: path -> the URL a request for it is sent to (302).
    Faults: "drop" (half the body, then the connection closes), "truncate" (half the file, with
    a matching Content-Length), "alter" (one byte changed), "404", "500", "ignore-range" (200 and
    the whole file whatever the Range).
    """

    def __init__(self, tls: Optional[ssl.SSLContext] = None) -> None:
        self.files, self.faults, self.always, self.requests, self.redirects = {}, {}, {}, [], {}
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self.scheme = "https" if tls is not None else "http"
        if tls is not None:
            self.httpd.socket = tls.wrap_socket(self.httpd.socket, server_side=True)
        self.httpd.daemon_threads = True
        self.httpd.fixture = self
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.02,), daemon=True)
        self.thread.start()

    @property
    def base(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.httpd.server_address[1]}/"

    def publish_small(self) -> None:
        """The tiny fixture pair where the published "small" model lives below ``base``."""
        self.publish_as(SMALL)

    def publish_as(self, model: PublishedModel) -> None:
        """The tiny fixture pair where the published ``model`` lives below ``base``."""
        base = self.base
        self.files.update({url[len(base):]: data for url, data in (
            (model.options_url(base), OPTIONS), (model.weights_url(base), WEIGHTS))})

    def count(self, path: str) -> int:
        return sum(1 for p, _ in self.requests if p == path)

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        fixture, path, ranged = self.server.fixture, self.path.lstrip("/"), self.headers.get("Range")
        fixture.requests.append((path, ranged))
        if path in fixture.redirects:
            self.send_response(302)
            self.send_header("Location", fixture.redirects[path])
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
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
    """A plain-http fixture server the registry's names point at, allowed through the environment,
    and a cache in the test's directory."""
    fixture = FixtureServer()
    monkeypatch.setenv(BASE_URL_ENV, fixture.base)
    monkeypatch.setenv(ALLOW_HTTP_ENV, "1")
    monkeypatch.setenv("SPACY_ELMO_CACHE", str(tmp_path / "cache"))
    yield fixture
    fixture.close()


@pytest.fixture()
def tls_server(monkeypatch, tmp_path):
    """A fixture server over HTTPS, with a certificate for 127.0.0.1 made for the test and trusted
    by every https connection the test opens."""
    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl command to make a certificate")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )
    served = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    served.load_cert_chain(cert, key)
    monkeypatch.setattr(ssl, "_create_default_https_context", lambda: ssl.create_default_context(cafile=str(cert)))
    fixture = FixtureServer(tls=served)
    yield fixture
    fixture.close()


def _closed_port_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"https://127.0.0.1:{sock.getsockname()[1]}/"


def _no_network(*args, **kwargs):
    pytest.fail("network used")


def _same_weights(a, b) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


def _weights_file_parameters(shape: str) -> int:
    """The parameters a published weights file of AllenNLP's shape name ("2x1024_128_2048cnn_1xhighway":
    layers x cells, projection, filters, highway layers) holds, counted on a biLM built to that shape."""
    published = PublishedShape.parse(shape)
    config = BiLMConfig(n_layers=published.n_layers, dim=published.dim, projection_dim=published.projection_dim,
                        n_highway=published.n_highway)
    assert config.n_filters == published.n_filters  # the published models all use the default filter set
    with torch.device("meta"):  # shapes only: no memory for the 93.6M parameters
        bilm = BiLM(config)
    # the character embedding's padding row is zeros added on import, not stored in the file
    return sum(p.numel() for p in bilm.parameters()) - config.char_embedding_dim


def _model_table(path: Path) -> dict:
    """RETURNS (dict): name -> the cells of its row, from the Markdown table of published models in ``path``."""
    rows = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        line = re.sub(r"<!--.*?-->", "", line)  # the evidence markers after numbers do not show
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if line.startswith("| `") and len(cells) > 1 and re.fullmatch(r"\d+x\d+_\S+", cells[1]):
            rows[cells[0].strip("`")] = cells
    return rows


def test_registry_entries_are_https_well_formed_and_fit_their_shapes(monkeypatch):
    monkeypatch.delenv(BASE_URL_ENV, raising=False)
    assert len({m.shape for m in PUBLISHED_MODELS.values()}) == len(PUBLISHED_MODELS)
    docs = (ROOT / "docs" / "download.md").read_text(encoding="utf-8")
    # the URL pattern docs/download.md cites from AllenNLP's code, "…/S/elmo_S_options.json"
    templates = re.findall(r"^(https://\S+/S/elmo_S_(?:options\.json|weights\.hdf5))$", docs, re.MULTILINE)
    assert len(templates) == 2
    for name, model in PUBLISHED_MODELS.items():
        assert model.name == name and re.fullmatch(r"[a-z0-9][a-z0-9.-]*", name)
        urls = (model.options_url(), model.weights_url())
        assert list(urls) == [t.replace("/S/elmo_S_", f"/{model.shape}/elmo_{model.shape}_") for t in templates]
        assert all(url.startswith(DEFAULT_BASE_URL) and url.startswith("https://") for url in urls)
        assert not model.http_only  # AllenNLP's bucket serves https
        for digest in (model.options_sha256, model.weights_sha256):
            assert digest is None or re.fullmatch(r"[0-9a-f]{64}", digest)
        parameters = _weights_file_parameters(model.shape)
        assert model.parameters == round(parameters / 1e6, 1), name
        assert model.size_mb == round(parameters * 4 / 1e6, 1), name


def test_readme_and_docs_tables_say_what_the_registry_says():
    table = _model_table(ROOT / "docs" / "download.md")
    assert list(table) == list(PUBLISHED_MODELS)
    for name, model in PUBLISHED_MODELS.items():
        assert table[name][1:4] == [model.shape, f"{model.parameters}M", f"{model.size_mb:.1f} MB"], name
        scores = re.findall(r"F1 (\d+\.\d+)", model.reported)[:2]
        assert re.findall(r"\d+\.\d+", table[name][-1])[:2] == scores, name
    # the README names the models and their range of sizes, and points at the table
    readme = re.sub(r"<!--.*?-->", "", (ROOT / "README.md").read_text(encoding="utf-8"))
    names = ", ".join(f"`{name}`" for name in PUBLISHED_MODELS)
    sizes = sorted(model.size_mb for model in PUBLISHED_MODELS.values())
    assert f"({names}; {sizes[0]:.0f} to {sizes[-1]:.0f} MB of\nweights)" in readme


def test_plain_http_is_refused_unless_allowed_and_nothing_is_sent(server, monkeypatch, tmp_path):
    server.publish_small()
    monkeypatch.delenv(ALLOW_HTTP_ENV)
    with pytest.raises(DownloadError, match=r"refusing plain http.*allow_http=True.*--allow-http") as err:
        fetch_published("small", transfer=Transfer(**FAST))
    assert err.value.url == server.base + OPTIONS_PATH
    with pytest.raises(DownloadError, match="refusing plain http"):
        fetch_pair(server.base + OPTIONS_PATH, server.base + WEIGHTS_PATH, tmp_path / "pair")
    monkeypatch.setenv(ALLOW_HTTP_ENV, "0")  # only "1" allows it
    with pytest.raises(DownloadError, match="refusing plain http"):
        load_bilm("small")
    assert server.requests == [] and not list((tmp_path / "cache").glob("*/*"))


def test_plain_http_asked_for_downloads_with_a_warning(server, monkeypatch, tmp_path):
    server.publish_small()
    monkeypatch.delenv(ALLOW_HTTP_ENV)
    with pytest.warns(RuntimeWarning, match="downloading over plain http") as caught:
        _, weights = fetch_published("small", transfer=Transfer(**FAST), allow_http=True)
    assert weights.read_bytes() == WEIGHTS
    assert {str(w.message).split(": ")[0] for w in caught} == {server.base + OPTIONS_PATH, server.base + WEIGHTS_PATH}
    # a registry entry marked as served over http alone needs no permission, and still warns
    http_only = {"small": replace(SMALL, http_only=True)}
    with pytest.warns(RuntimeWarning, match="downloading over plain http"):
        fetch_published("small", models=http_only, directory=tmp_path / "http-only", transfer=Transfer(**FAST))
    assert (tmp_path / "http-only" / "weights.hdf5").read_bytes() == WEIGHTS
    # the environment allows it where no argument reaches the download (a name given to load_bilm)
    monkeypatch.setenv(ALLOW_HTTP_ENV, "1")
    monkeypatch.setenv("SPACY_ELMO_CACHE", str(tmp_path / "other-cache"))
    with pytest.warns(RuntimeWarning, match="downloading over plain http"):
        assert _same_weights(load_bilm("small", optimize=False), load_tiny_bilm())


def test_redirect_from_https_to_http_is_refused_naming_both_urls(server, tls_server, tmp_path, recwarn):
    server.publish_small()
    tls_server.publish_small()
    # a redirect that stays on https is followed, with no warning
    for path in (OPTIONS_PATH, WEIGHTS_PATH):
        tls_server.redirects["moved/" + path] = tls_server.base + path
    moved = [tls_server.base + "moved/" + path for path in (OPTIONS_PATH, WEIGHTS_PATH)]
    assert fetch_pair(*moved, tmp_path / "moved", transfer=Transfer(**FAST))[1].read_bytes() == WEIGHTS
    assert not [w for w in recwarn if "plain http" in str(w.message)]
    # to plain http: refused even where http is allowed, before anything is asked of the http server
    tls_server.redirects[OPTIONS_PATH] = server.base + OPTIONS_PATH
    tls_server.requests.clear()
    with pytest.raises(DownloadError, match="from https to http; refusing the downgrade") as err:
        fetch_published("small", base_url=tls_server.base, directory=tmp_path / "down", transfer=Transfer(**FAST),
                        allow_http=True)
    assert f"redirected {tls_server.base + OPTIONS_PATH} to {server.base + OPTIONS_PATH}" in str(err.value)
    assert server.requests == [] and tls_server.count(OPTIONS_PATH) == 1  # not retried
    assert not (tmp_path / "down" / "options.json").exists()


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
    assert _same_weights(load_bilm("small", optimize=False), bilm) and len(server.requests) == 2


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
    monkeypatch.setattr(urllib.request.OpenerDirector, "open", _no_network)
    save_bilm(load_tiny_bilm(), tmp_path / "model")
    assert _same_weights(load_bilm(tmp_path / "model", optimize=False), load_bilm(options=tiny_paths[0],
                                                                                 weights=tiny_paths[1], optimize=False))


def test_unknown_name_lists_the_published_names_and_a_directory_wins(monkeypatch, tmp_path):
    monkeypatch.setattr(urllib.request.OpenerDirector, "open", _no_network)
    with pytest.raises(ModelFileError, match=r"not found.*small, medium, original, original-5.5b"):
        load_bilm("smal")
    save_bilm(load_tiny_bilm(), tmp_path / "small")
    monkeypatch.chdir(tmp_path)
    assert _same_weights(load_bilm("small", optimize=False), load_tiny_bilm())


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
