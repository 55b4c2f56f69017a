"""One bad request never fails another: a text with lone surrogates is cleaned and answered, a request
the pipeline fails on gets its own 500 while its batch mates get their vectors, and every error answer
has the one shape."""
import asyncio
import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
httpx = pytest.importorskip("httpx")

from lab.serve.load_test import conllu_texts  # noqa: E402
from spacy_elmo.export.serve import LocalServer, make_app  # noqa: E402
from spacy_elmo.export.serve_body import decode_array, drop_lone_surrogates  # noqa: E402

from .serving import GATE, SEEN, test_pipeline  # noqa: E402

DEV = Path(__file__).parent.parent.parent / "sample" / "ewt" / "dev.conllu"
SIXTEEN = conllu_texts(DEV)[:16]


@pytest.fixture(scope="module")
def offline():
    return test_pipeline()


def _batched(app, url, bodies):
    """Send a request that holds the worker, then ``bodies`` all at once, then open the gate: the
    bodies wait together and run as one batch."""
    GATE.clear()
    hold = f"HOLD the worker {len(SEEN)}"

    async def run():
        async with httpx.AsyncClient(base_url=url, timeout=120) as client:
            held = asyncio.ensure_future(client.post("/embed", json={"text": hold}))
            while hold not in SEEN:
                await asyncio.sleep(0.01)
            answers = [asyncio.ensure_future(client.post("/embed", content=json.dumps(b))) for b in bodies]
            while app.state.batcher.waiting < len(bodies):
                await asyncio.sleep(0.01)
            GATE.set()
            return await held, await asyncio.gather(*answers)

    return asyncio.run(run())


def _assert_offline(response, text, offline, tolerance=1e-5):
    assert response.status_code == 200, response.text
    payload = response.json()
    doc = offline(text)
    assert payload["tokens"] == [t.text for t in doc]
    assert np.abs(decode_array(payload["mixed"]) - doc._.elmo.mixed).max() <= tolerance


def test_sixteen_requests_in_one_batch_one_with_a_lone_surrogate_all_get_200_and_the_offline_vectors(offline):
    bad = "A bad \ud800 text that spaCy cannot hold."
    texts = SIXTEEN[:7] + [bad] + SIXTEEN[7:15]
    app = make_app(test_pipeline(gate=True), max_batch=32, wait_ms=50)
    with LocalServer(app) as url:
        held, answers = _batched(app, url, [{"text": t} for t in texts])
    assert held.status_code == 200
    assert app.state.metrics.batch_sizes[16] == 1  # the sixteen ran as one batch
    for text, response in zip(texts, answers):
        _assert_offline(response, drop_lone_surrogates(text), offline)
    assert answers[7].headers["X-Dropped-Characters"] == "1"


def test_a_request_the_pipeline_fails_on_fails_alone_and_its_batch_mates_get_their_vectors(offline):
    texts = SIXTEEN[:5] + ["This one will EXPLODE in the pipeline."] + SIXTEEN[5:15]
    pipeline = test_pipeline(gate=True, explode=True)
    app = make_app(pipeline, max_batch=32, wait_ms=50)
    with LocalServer(app) as url:
        _, answers = _batched(app, url, [{"text": t} for t in texts])
    assert app.state.metrics.batches_retried == 1
    failed = answers[5]
    assert failed.status_code == 500
    assert set(failed.json()) == {"error", "status", "request_id"} and failed.json()["status"] == 500
    assert "ValueError: this text breaks the pipeline" in failed.json()["error"]
    for text, response in zip(texts[:5] + texts[6:], answers[:5] + answers[6:]):
        _assert_offline(response, text, offline)


def test_a_batch_request_answers_each_text_as_offline(offline):
    with LocalServer(make_app(test_pipeline())) as url:
        response = httpx.post(f"{url}/embed", json={"texts": SIXTEEN[:3], "layers": True}, timeout=60)
    results = response.json()["results"]
    assert len(results) == 3
    for text, result in zip(SIXTEEN[:3], results):
        doc = offline(text)
        assert result["tokens"] == [t.text for t in doc]
        assert np.abs(decode_array(result["layers"]) - doc._.elmo.layers).max() <= 1e-5
        assert np.abs(decode_array(result["mixed"]) - doc._.elmo.mixed).max() <= 1e-5


def test_every_error_answer_has_the_one_shape_and_the_server_goes_on():
    app = make_app(test_pipeline(), max_chars=100, max_batch=2, max_response_mb=0.001)
    with LocalServer(app) as url, httpx.Client(base_url=url, timeout=60) as client:
        answers = {
            400: client.post("/embed", content=b'{"text": "\xff\xfe"}'),
            404: client.get("/nowhere"),
            405: client.get("/embed"),
            413: client.post("/embed", json={"texts": ["a", "b", "c"]}),
            422: client.post("/embed", content=b"{text: nope"),
        }
        too_long = client.post("/embed", json={"text": "word " * 30})
        too_large = client.post("/embed", json={"text": "A short text .", "layers": True, "encoding": "numbers"})
        given_id = client.post("/embed", json={"txt": "x"}, headers={"X-Request-ID": "abc-123"})
        nested = client.post("/embed", content=b'{"text": ' + b"[" * 30000 + b"]" * 30000 + b"}")
        fine = client.post("/embed", json={"text": "Still serving ."})
    for status, response in answers.items():
        body = response.json()
        assert response.status_code == status and set(body) == {"error", "status", "request_id"}, (status, body)
        assert body["status"] == status and body["error"] and body["request_id"] == response.headers["X-Request-ID"]
    assert "not UTF-8" in answers[400].json()["error"] and "3 texts" in answers[413].json()["error"]
    assert too_long.status_code == 413 and "over the limit of 100" in too_long.json()["error"]
    assert too_large.status_code == 413 and "the response would take" in too_large.json()["error"]
    assert given_id.status_code == 422 and given_id.json()["request_id"] == "abc-123"
    assert nested.status_code == 422 and "nests too deep" in nested.json()["error"]
    assert fine.status_code == 200 and "layers" not in fine.json()
