"""A served pipeline for tests: the trained test pair in blank English, with a gate that holds the
worker on a text starting "HOLD" until the test opens it (so a test fills the queue, or makes a
batch, without depending on time), and a component that raises on "EXPLODE"; and the pair with a
tagger, a parser, an entity recognizer and a text classifier trained for a few steps."""
import asyncio
import functools
import json
import socket
import threading
import time
from typing import List, Tuple

from spacy.language import Language
from spacy.training import Example

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


# a few sentences with tags, a parse, entities and a class each, for the trained components
TRAINING = [
    ("Anna sat by the river .", ["NNP", "VBD", "IN", "DT", "NN", "."], [1, 1, 1, 4, 2, 1],
     ["nsubj", "ROOT", "prep", "det", "pobj", "punct"], [(0, 4, "PERSON")], "CALM"),
    ("The bank in Paris closed .", ["DT", "NN", "IN", "NNP", "VBD", "."], [1, 4, 1, 2, 4, 4],
     ["det", "nsubj", "prep", "pobj", "ROOT", "punct"], [(12, 17, "GPE")], "BUSY"),
    ("We deposited cash at the bank .", ["PRP", "VBD", "NN", "IN", "DT", "NN", "."], [1, 1, 1, 1, 5, 3, 1],
     ["nsubj", "ROOT", "dobj", "prep", "det", "pobj", "punct"], [], "BUSY"),
    ("Boats came back to Paris .", ["NNS", "VBD", "RB", "IN", "NNP", "."], [1, 1, 1, 1, 3, 1],
     ["nsubj", "ROOT", "advmod", "prep", "pobj", "punct"], [(19, 24, "GPE")], "CALM"),
]
TRAINED_COMPONENTS = ("tagger", "parser", "ner", "textcat")
STEPS = 20  # the entity recognizer finds the entities it was shown by then


@functools.lru_cache(maxsize=1)
def trained_pipeline():
    """The served test pair with ``TRAINED_COMPONENTS`` (each with its own tok2vec) trained for a
    few steps on ``TRAINING``: enough that they set their annotations, not that they are right."""
    nlp = test_pipeline()
    for name in TRAINED_COMPONENTS:
        # the parser learns every label, however rare (by default those seen under 30 times are one)
        nlp.add_pipe(name, config={"min_action_freq": 1} if name == "parser" else {})
    examples = []
    for text, tags, heads, deps, ents, label in TRAINING:
        words = text.split()
        examples.append(Example.from_dict(nlp.make_doc(text), {
            "words": words, "tags": tags, "heads": heads, "deps": deps, "entities": [list(e) for e in ents],
            "cats": {"CALM": float(label == "CALM"), "BUSY": float(label == "BUSY")}}))
    for name in TRAINED_COMPONENTS:
        nlp.get_pipe(name).initialize(lambda: examples, nlp=nlp)
    optimizer = nlp.create_optimizer()
    for _ in range(STEPS):
        nlp.update(examples, sgd=optimizer, exclude=["elmo"])
    return nlp


MEETING = threading.Barrier(2)


@Language.component("serve_test_meet")
def serve_test_meet(doc):
    """Two threads' pipelines meet on a text starting "MEET": both are inside ``nlp.pipe`` at once."""
    if doc.text.startswith("MEET"):
        MEETING.wait(timeout=120)
    return doc


async def until(condition, limit=60.0):
    """Wait for ``condition()`` (a state the server reaches, not a time); fail after ``limit`` s."""
    deadline = time.monotonic() + limit
    while not condition():
        assert time.monotonic() < deadline, "the server never reached the state the test waits for"
        await asyncio.sleep(0.01)
