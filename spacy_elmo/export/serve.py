"""A spaCy pipeline's ELMo vectors over HTTP (FastAPI), concurrent requests batched into ``nlp.pipe``.

    import spacy, spacy_elmo, uvicorn
    from spacy_elmo.export.serve import make_app
    nlp = spacy.blank("en"); nlp.add_pipe("elmo")      # or spacy.load(a pipeline with an elmo component)
    uvicorn.run(make_app(nlp), host="127.0.0.1", port=8000)

``POST /embed`` with ``{"text": "..."}`` (or ``{"texts": [...]}``) answers ``{"tokens": [...], "mixed":
ARRAY}`` (``{"results": [...]}``): ``doc._.elmo.mixed`` (n_tokens, width), and with ``"layers": true``
``doc._.elmo.layers`` (L+1, n_tokens, width) as well; an ARRAY is ``{"dtype", "shape", "data"}``
(``serve_body``: base64 by default, JSON numbers or msgpack on request, gzip where accepted).
``GET /health`` (alive: batches and texts run so far), ``GET /ready`` (503 while the queue is full),
``GET /metrics`` (``serve_metrics``). Every 4xx and 5xx answer is ``{"error": "one line", "status":
N, "request_id": "..."}``; a request the pipeline fails on fails alone (``serve_queue``), and a line
is logged for each request (``spacy_elmo.serve``: its id, status, texts, tokens, bytes, latency).

This module needs the ``serve`` extra (fastapi, uvicorn); it takes any ``nlp`` whose Docs get
``doc._.elmo``.
"""
import logging
import re
import threading
import time
import uuid
from typing import Any, Dict, List, Optional

import numpy as np

from .serve_body import (
    JSON,
    MSGPACK,
    EmbedRequest,
    RequestError,
    accepts_gzip,
    body_limit,
    check_response_size,
    doc_arrays,
    encode_response,
    error_body,
    maybe_gzip,
    parse_request,
    read_body,
    response_format,
)
from .serve_metrics import Metrics
from .serve_queue import MAX_BATCH, MAX_QUEUE, WAIT_MS, Answer, Batcher

MAX_CHARS = 20_000
MAX_RESPONSE_MB = 8.0
LOG = logging.getLogger("spacy_elmo.serve")
DEFAULTS_CHANGED = ('299 spacy-elmo "since 0.10 /embed answers the mixed vector alone, its arrays base64; send '
                    '\\"layers\\": true and \\"encoding\\": \\"numbers\\" for the old body"')
_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,64}$")


def doc_payload(doc: Any, layers: bool = True) -> Dict[str, Any]:
    """A Doc's tokens and arrays as lists (the offline result a response is checked against)."""
    return {k: v if k == "tokens" else v.tolist() for k, v in doc_arrays(doc, layers).items()}


def make_app(nlp: Any, *, max_chars: int = MAX_CHARS, max_batch: int = MAX_BATCH, wait_ms: float = WAIT_MS,
             max_queue: int = MAX_QUEUE, max_response_mb: float = MAX_RESPONSE_MB,
             torch_threads: Optional[int] = None):
    """The FastAPI app serving ``nlp``; its ``state.batcher`` is the ``Batcher``, ``state.metrics`` the
    ``Metrics``.

    max_chars (int): the longest text (413 beyond).
    max_batch (int): most texts in one ``nlp.pipe`` batch, and in one request.
    wait_ms (float): how long a batch waits for more requests.
    max_queue (int): most texts waiting; a request past it gets 503 and Retry-After at once.
    max_response_mb (float): the largest response body (413 beyond, before it is encoded).
    torch_threads (Optional[int]): what ``/health`` reports as torch's threads (default: torch's now).
    """
    from contextlib import asynccontextmanager

    from fastapi import FastAPI, Request
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse, Response
    from starlette.exceptions import HTTPException
    from starlette.requests import ClientDisconnect

    if max_chars < 1 or max_response_mb <= 0:
        raise ValueError(f"max_chars ({max_chars}) and max_response_mb ({max_response_mb}) must be positive")
    metrics = Metrics(max_queue)
    # floats a token takes: the mixed vector's width and the layers' (L+1) * width, learnt from the
    # first answer, so that a request whose answer would pass the limit is refused before it is computed
    widths: Dict[str, int] = {}
    batcher = Batcher(nlp, max_batch=max_batch, wait_ms=wait_ms, max_queue=max_queue, metrics=metrics)
    limit = body_limit(max_chars, max_batch)
    max_bytes = int(max_response_mb * 2**20)
    if torch_threads is None:
        import torch

        torch_threads = torch.get_num_threads()

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        await batcher.start()
        yield
        await batcher.stop()

    app = FastAPI(title="spacy-elmo", lifespan=lifespan)
    app.state.batcher = batcher
    app.state.metrics = metrics

    def error(status: int, message: str, request_id: str, headers: Optional[Dict[str, str]] = None) -> Response:
        return Response(error_body(status, message, request_id), status_code=status, media_type=JSON,
                        headers={"X-Request-ID": request_id, **(headers or {})})

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> Response:
        return error(exc.status_code, str(exc.detail), _request_id(request), dict(exc.headers or {}))

    @app.exception_handler(RequestValidationError)
    async def malformed(request: Request, exc: RequestValidationError) -> Response:
        return error(422, f"malformed request: {exc.errors()[0].get('msg', 'invalid') if exc.errors() else 'invalid'}",
                     _request_id(request))

    @app.exception_handler(Exception)
    async def failed(request: Request, exc: Exception) -> Response:
        LOG.exception("request_id=%s failed", _request_id(request))
        return error(500, f"internal error: {type(exc).__name__}", _request_id(request))

    @app.get("/health")
    async def health() -> Dict[str, Any]:
        return {"status": "ok", "batches": metrics.batches, "texts": metrics.batched_texts,
                "torch_threads": torch_threads}

    @app.get("/ready")
    async def ready(request: Request) -> Response:
        if batcher.full:
            return error(503, f"not ready: the queue is full ({batcher.waiting} texts of {max_queue})",
                         _request_id(request), {"Retry-After": str(batcher.retry_after())})
        return JSONResponse({"status": "ready", "queue_depth": batcher.waiting, "queue_limit": max_queue})

    @app.get("/metrics")
    async def show_metrics(request: Request) -> Response:
        if JSON in request.headers.get("accept", ""):
            return JSONResponse(metrics.snapshot())
        return Response(metrics.prometheus(), media_type="text/plain; version=0.0.4")

    @app.post("/embed")
    async def embed(request: Request) -> Response:
        started = time.perf_counter()
        request_id = _request_id(request)
        texts, tokens, status = 0, 0, 500
        try:
            body = await read_body(request.headers, request.stream(), limit)
            parsed = parse_request(body, max_chars=max_chars, max_texts=max_batch)
            texts = len(parsed.texts)
            fmt = response_format(request.headers.get("accept"))
            gzip_ok = accepts_gzip(request.headers.get("accept-encoding"))
            answer = await batcher.submit(parsed.texts, _encoder(parsed, fmt, gzip_ok, max_bytes, widths),
                                          request.is_disconnected, _size_check(nlp, parsed, fmt, max_bytes, widths))
            tokens, status = answer.tokens, 200
            response = Response(answer.body, media_type=MSGPACK if fmt == "msgpack" else JSON,
                                headers=_answer_headers(request_id, answer, parsed))
        except RequestError as err:
            status = err.status
            response = error(err.status, err.message, request_id, err.headers)
        except ClientDisconnect:  # the client left while its body streamed in: no answer reaches it
            status = 499
            response = error(499, "the client left before its body was read", request_id)
        except Exception as err:  # the pipeline failed on this request alone: the others got theirs
            LOG.exception("request_id=%s failed", request_id)
            response = error(500, f"the pipeline failed on this request: {type(err).__name__}: {err}"[:300], request_id)
        seconds = time.perf_counter() - started
        metrics.request_done(status, seconds, texts, tokens)
        LOG.info("request_id=%s status=%d texts=%d tokens=%d bytes=%d latency_ms=%.1f queue=%d", request_id, status,
                 texts, tokens, len(response.body), 1000 * seconds, batcher.waiting)
        return response

    return app


def _request_id(request: Any) -> str:
    """The client's X-Request-ID where it is a short plain token, else a new one."""
    given = request.headers.get("x-request-id", "")
    return given if _REQUEST_ID.match(given) else uuid.uuid4().hex[:16]


def _encoder(parsed: EmbedRequest, fmt: str, gzip_ok: bool, max_bytes: int, widths: Dict[str, int]):
    """Docs -> the request's Answer, run in the worker thread (``widths``: learnt from the first Doc)."""

    def encode(docs: List[Any]) -> Answer:
        if docs and not widths:
            n_layers, _, width = np.shape(docs[0]._.elmo.layers)
            widths.update(mixed=width, layers=n_layers * width)
        results = [doc_arrays(doc, parsed.layers) for doc in docs]
        body = encode_response(results, single=parsed.single, fmt=fmt, encoding=parsed.encoding, max_bytes=max_bytes)
        packed = maybe_gzip(body, gzip_ok)
        tokens = sum(len(doc) for doc in docs)
        return Answer(body, tokens) if packed is None else Answer(packed, tokens, gzipped=True)

    return encode


def _size_check(nlp: Any, parsed: EmbedRequest, fmt: str, max_bytes: int, widths: Dict[str, int]):
    """Texts -> None, or 413 when their answer would pass the limit: run in the worker thread before
    they are computed (the tokenizer is cheap, the biLM on thousands of tokens is not); nothing is
    refused before the first answer has given the widths."""

    def check(texts: List[str]) -> None:
        if widths:
            tokens = sum(len(nlp.make_doc(text)) for text in texts)
            floats = widths["mixed"] + (widths["layers"] if parsed.layers else 0)
            check_response_size(4 * floats * tokens, fmt=fmt, encoding=parsed.encoding, layers=parsed.layers,
                                max_bytes=max_bytes)

    return check


def _answer_headers(request_id: str, answer: Answer, parsed: EmbedRequest) -> Dict[str, str]:
    headers = {"X-Request-ID": request_id, "Vary": "Accept, Accept-Encoding"}
    if answer.gzipped:
        headers["Content-Encoding"] = "gzip"
    if parsed.relies_on_defaults:
        headers["Warning"] = DEFAULTS_CHANGED
    if parsed.dropped_characters:
        headers["X-Dropped-Characters"] = str(parsed.dropped_characters)
    return headers


class LocalServer:
    """``uvicorn`` serving an app on 127.0.0.1 (a free port) in a background thread, for tests and
    load tests: ``with LocalServer(app) as url: ...``."""

    def __init__(self, app: Any, *, start_timeout: float = 30.0) -> None:
        import uvicorn

        config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="on")
        self.server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self.server.run, name="uvicorn", daemon=True)
        self._timeout = start_timeout

    def __enter__(self) -> str:
        self._thread.start()
        deadline = time.monotonic() + self._timeout
        while not self.server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the local server did not start")
            time.sleep(0.02)
        port = self.server.servers[0].sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    def __exit__(self, *exc: Any) -> None:
        self.server.should_exit = True
        self._thread.join(timeout=10)
