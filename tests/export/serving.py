"""A served pipeline for tests: the trained test pair in blank English, with a gate that holds the
worker on a text starting "HOLD" until the test opens it (so a test fills the queue, or makes a
batch, without depending on time), and a component that raises on "EXPLODE"."""
import json
import socket
import threading
from typing import List, Tuple

from spacy.language import Language

from spacy_elmo.export.serve_pipeline import serving_pipeline

from ..conftest import TRAINED

GATE = threading.Event()
SEEN: List[str] = []  # every text the pipeline ran, in order


@Language.component("serve_test_gate")
def serve_test_gate(doc):
    SEEN.append(doc.text)
    if doc.text.startswith("HOLD"):
        GATE.wait(timeout=120)
    return doc


@Language.component("serve_test_explode")
def serve_test_explode(doc):
    if "EXPLODE" in doc.text:
        raise ValueError("this text breaks the pipeline")
    return doc


def test_pipeline(*, gate: bool = False, explode: bool = False):
    """The trained test pair served as ``serve --options --weights --lang en`` serves it."""
    nlp = serving_pipeline(options=TRAINED / "options.json", weights=TRAINED / "lm_weights.hdf5", lang="en")
    if gate:
        nlp.add_pipe("serve_test_gate", first=True)
    if explode:
        nlp.add_pipe("serve_test_explode", first=True)
    return nlp


test_pipeline.__test__ = False  # a helper, not a test


def raw_request(url: str, head: str, body: bytes = b"", *, read: bool = True) -> Tuple[int, dict, socket.socket]:
    """Send ``head`` (request line and headers, without the blank line) and ``body`` on a socket of its
    own; RETURNS the status and JSON body of the answer (0, {} when ``read`` is False) and the socket."""
    host, port = url.rsplit("//", 1)[1].split(":")
    sock = socket.create_connection((host, int(port)), timeout=60)
    sock.sendall(head.encode("latin-1") + b"\r\n\r\n" + body)
    if not read:
        return 0, {}, sock
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(65536)
    header, _, rest = data.partition(b"\r\n\r\n")
    length = int(next(line.split(b":")[1] for line in header.split(b"\r\n") if line.lower().startswith(b"content-length")))
    while len(rest) < length:
        rest += sock.recv(65536)
    return int(header.split()[1]), json.loads(rest[:length]), sock
