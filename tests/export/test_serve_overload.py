"""The served pipeline under overload: a full queue answers 503 with Retry-After without waiting for
the model, /ready says so, work for a client that left is never computed, and a body over the limit
is refused from its Content-Length before it is read."""
import asyncio
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
httpx = pytest.importorskip("httpx")

from spacy_elmo.export.serve import LocalServer, make_app  # noqa: E402

from .serving import GATE, SEEN, raw_request, test_pipeline, until  # noqa: E402


def test_a_full_queue_answers_503_with_retry_after_while_the_model_is_busy_and_ready_says_so():
    GATE.clear()
    app = make_app(test_pipeline(gate=True), max_queue=2, wait_ms=0)
    hold = f"HOLD the worker {len(SEEN)}"

    async def run(url):
        async with httpx.AsyncClient(base_url=url, timeout=120) as client:
            held = asyncio.ensure_future(client.post("/embed", json={"text": hold}))
            await until(lambda: hold in SEEN)
            queued = [asyncio.ensure_future(client.post("/embed", json={"text": f"Queued text {i} ."})) for i in range(2)]
            await until(lambda: app.state.batcher.waiting == 2)
            refused = await client.post("/embed", json={"text": "One too many ."})
            not_ready = await client.get("/ready")
            still_busy = hold == SEEN[-1]  # the model was still on the held text when the 503 came
            GATE.set()
            answers = [await held] + list(await asyncio.gather(*queued))
            return refused, not_ready, still_busy, answers, await client.get("/ready")

    with LocalServer(app) as url:
        refused, not_ready, still_busy, answers, ready = asyncio.run(run(url))
    assert still_busy
    assert refused.status_code == 503 and int(refused.headers["Retry-After"]) >= 1
    assert refused.json()["status"] == 503 and "the queue holds 2" in refused.json()["error"]
    assert not_ready.status_code == 503 and "Retry-After" in not_ready.headers
    assert [a.status_code for a in answers] == [200, 200, 200]
    assert ready.status_code == 200 and ready.json() == {"status": "ready", "queue_depth": 0, "queue_limit": 2}
    metrics = app.state.metrics.snapshot()
    assert metrics["rejected_overload"] == 1 and metrics["requests"]["503"] == 1
    assert "One too many ." not in SEEN


def test_work_for_a_client_that_left_is_dropped_before_it_is_computed():
    GATE.clear()
    app = make_app(test_pipeline(gate=True), wait_ms=0)
    hold = f"HOLD the worker {len(SEEN)}"
    gone = f"A client that leaves {len(SEEN)} ."

    async def run(url):
        async with httpx.AsyncClient(base_url=url, timeout=120) as client:
            held = asyncio.ensure_future(client.post("/embed", json={"text": hold}))
            await until(lambda: hold in SEEN)
            body = ('{"text": "%s"}' % gone).encode()
            _, _, sock = raw_request(url, f"POST /embed HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n"
                                          f"Content-Length: {len(body)}", body, read=False)
            await until(lambda: app.state.batcher.waiting == 1)
            sock.close()
            stays = asyncio.ensure_future(client.post("/embed", json={"text": "A client that stays ."}))
            await until(lambda: app.state.batcher.waiting == 2)
            GATE.set()
            await held
            answer = await stays
            await until(lambda: app.state.metrics.dropped_disconnected == 1)
            return answer

    with LocalServer(app) as url:
        answer = asyncio.run(run(url))
    assert answer.status_code == 200
    assert gone not in SEEN and "A client that stays ." in SEEN
    assert app.state.metrics.requests[499] == 1 and 500 not in app.state.metrics.requests  # counted, not failed


def test_a_client_that_leaves_while_its_body_streams_is_counted_499_not_a_failure(caplog):
    app = make_app(test_pipeline())
    with LocalServer(app) as url:
        _, _, sock = raw_request(url, "POST /embed HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n"
                                      "Content-Length: 1000", b'{"text": "The rest never comes', read=False)
        with caplog.at_level("INFO", logger="spacy_elmo.serve"):
            sock.close()
            asyncio.run(until(lambda: app.state.metrics.requests[499] == 1))
        after = httpx.post(f"{url}/embed", json={"text": "Still serving ."}, timeout=60)
    assert 500 not in app.state.metrics.requests and after.status_code == 200
    assert not [r for r in caplog.records if r.levelname == "ERROR"]
    assert any("status=499" in r.getMessage() for r in caplog.records)


def _rss_bytes():
    return int(Path("/proc/self/statm").read_text().split()[1]) * 4096


@pytest.mark.skipif(not Path("/proc/self/statm").exists(), reason="reads the resident set from /proc")
def test_a_50_mb_body_is_refused_from_its_content_length_before_it_is_read():
    app = make_app(test_pipeline())
    size = 50 * 2**20
    with LocalServer(app) as url:
        httpx.post(f"{url}/embed", json={"text": "Warm the server up ."}, timeout=60)
        before = _rss_bytes()
        status, body, sock = raw_request(url, f"POST /embed HTTP/1.1\r\nHost: test\r\nContent-Type: application/json"
                                              f"\r\nContent-Length: {size}", b'{"text": "' + b"x" * 65536)
        chunk = b"x" * 2**20
        try:  # the rest of the 50 MB, as a client that does not wait would send it
            for _ in range(size // len(chunk)):
                sock.sendall(chunk)
        except OSError:
            pass  # the server closed the connection: it reads none of it
        sock.close()
        grown = _rss_bytes() - before
        after = httpx.post(f"{url}/embed", json={"text": "Still serving ."}, timeout=60)
    assert status == 413 and body["status"] == 413 and f"{size} bytes is over the limit" in body["error"]
    assert grown < 10 * 2**20
    assert after.status_code == 200


def test_a_chunked_body_is_refused_once_it_streams_past_the_limit():
    app = make_app(test_pipeline(), max_chars=10, max_batch=1)  # a limit of 65,656 bytes
    chunk = b"x" * 30000
    chunks = b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for _ in range(3))
    with LocalServer(app) as url:
        status, body, sock = raw_request(url, "POST /embed HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n"
                                              "Transfer-Encoding: chunked", chunks + b"0\r\n\r\n")
        sock.close()
    assert status == 413 and "more than 65656 bytes" in body["error"]


def test_an_answer_over_the_limit_is_refused_before_its_text_is_computed_naming_what_would_fit():
    nlp = test_pipeline(gate=True)
    width = nlp("Warm up .")._.elmo.mixed.shape[1]
    tokens = 40
    # msgpack fits, base64 does not; the texts' limit given, not the one that fits the default body
    app = make_app(nlp, max_chars=20_000, max_response_mb=(4 * width * tokens + 64) / 2**20)
    big = " ".join(f"word{i}" for i in range(tokens - 1)) + " ."
    with LocalServer(app) as url, httpx.Client(base_url=url, timeout=60) as client:
        # the first request: the warm-up has given the widths already
        refused = client.post("/embed", json={"text": big})
        in_msgpack = client.post("/embed", json={"text": big}, headers={"Accept": "application/msgpack"})
        with_layers = client.post("/embed", json={"text": big, "layers": True})
    assert refused.status_code == 413 and refused.json()["error"].endswith("ask for fewer or shorter texts, or in msgpack")
    assert with_layers.status_code == 413 and "without layers" in with_layers.json()["error"]
    assert in_msgpack.status_code == 200
    assert SEEN.count(big) == 1  # computed once, for the msgpack answer alone
    assert app.state.metrics.batched_texts == 1  # the refused ones are in no batch, nor is the warm-up


def test_the_connection_closes_after_a_body_refused_unread():
    app = make_app(test_pipeline(), max_chars=10, max_batch=1)
    with LocalServer(app) as url:
        status, _, sock = raw_request(url, "POST /embed HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n"
                                           "Content-Length: 1000000")
        sock.settimeout(30)
        closed = sock.recv(1) == b""  # the server closed its side: no wait for a body it will not read
        sock.close()
    assert status == 413 and closed
