"""A spaCy pipeline's ELMo vectors over HTTP (FastAPI), concurrent requests batched into ``nlp.pipe``.

    import spacy, spacy_elmo, uvicorn
    from spacy_elmo.export.serve import make_app
    nlp = spacy.blank("en"); nlp.add_pipe("elmo")      # or spacy.load(a pipeline with an elmo component)
    uvicorn.run(make_app(nlp), host="127.0.0.1", port=8000)

``POST /embed`` with ``{"text": "..."}`` (or ``{"texts": [...]}``) answers ``{"tokens": [...], "mixed":
ARRAY}`` (``{"results": [...]}``): ``doc._.elmo.mixed`` (n_tokens, width), and with ``"layers": true``
``doc._.elmo.layers`` (L+1, n_tokens, width) as well; an ARRAY is ``{"dtype", "shape", "data"}``
(``serve_body``: base64 by default, JSON numbers or msgpack on request, gzip where accepted). Beside
them, what the pipeline's other components set (``tags``, ``ents``, ``cats``, ...: ``serve_body``).
``GET /health`` (alive: batches and texts run so far, and the limits: the most tokens an answer
holds), ``GET /ready`` (503 while the queue is full), ``GET /metrics`` (``serve_metrics``). Every 4xx
and 5xx answer is ``{"error": "one line", "status": N, "request_id": "..."}``; a request the pipeline
fails on fails alone, and a short request waits in a lane of its own, not behind a long text
(``serve_queue``); a line is logged for each request (``spacy_elmo.serve``: its id, status, texts,
tokens, bytes, latency).

Before it serves, the app runs two warm-up texts through the pipeline (``serve_pipeline.warm_up``):
they give the vectors' width, so that an answer over the response limit is refused before it is
computed and the default longest text is one whose answer fits, and the annotations to answer with.

This module needs the ``serve`` extra (fastapi, uvicorn); it takes any ``nlp`` whose Docs get
``doc._.elmo``.
"""
import logging
import re
import threading
import time
import uuid
from typing import Any, Dict, List, Optional

from .serve_body import (
    ANSWER_KEYS,
    JSON,
    MSGPACK,
    EmbedRequest,
    RequestError,
    accepts_gzip,
    answer_tokens,
    body_limit,
    check_response_size,
    doc_annotations,
    doc_arrays,
    encode_response,
    error_body,
    maybe_gzip,
    parse_request,
    read_body,
    response_format,
)
from .serve_metrics import Metrics
from .serve_pipeline import Served, warm_up
from .serve_queue import LONG_CHARS, MAX_BATCH, MAX_QUEUE, WAIT_MS, Answer, Lanes

# the longest text by default: what an answer of the mixed vector holds in the default body (JSON,
# base64) at CHARS_PER_TOKEN characters a token, at most MAX_CHARS (English running text takes about
# 4.8 characters a token with its space: 4 leaves room for denser text)
MAX_CHARS = 20_000
CHARS_PER_TOKEN = 4
MAX_RESPONSE_MB = 8.0
LOG = logging.getLogger("spacy_elmo.serve")
DEFAULTS_CHANGED = ('299 spacy-elmo "since 0.10 /embed answers the mixed vector alone, its arrays base64; send '
                    '\\"layers\\": true and \\"encoding\\": \\"numbers\\" for the old body"')
_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,64}$")


def doc_payload(doc: Any, layers: bool = True) -> Dict[str, Any]:
    """A Doc's tokens and arrays as lists (the offline result a response is checked against)."""
    return {k: v if k == "tokens" else v.tolist() for k, v in doc_arrays(doc, layers).items()}


def default_max_chars(tokens: Dict[str, Dict[str, int]]) -> int:
    """The longest text by default, from ``answer_tokens``' counts: what an answer of the mixed vector
    holds in the default body at ``CHARS_PER_TOKEN`` characters a token, at most ``MAX_CHARS``."""
    return max(1, min(MAX_CHARS, tokens["base64"]["mixed"] * CHARS_PER_TOKEN))


def make_app(nlp: Any, *, max_chars: Optional[int] = None, max_batch: int = MAX_BATCH, wait_ms: float = WAIT_MS,
             max_queue: int = MAX_QUEUE, max_response_mb: float = MAX_RESPONSE_MB, long_chars: int = LONG_CHARS,
             torch_threads: Optional[int] = None, side_by_side: bool = True):
    """The FastAPI app serving ``nlp``, warmed up (``serve_pipeline.warm_up``); its ``state.batcher``
    is the ``Lanes``, ``state.metrics`` the ``Metrics``, ``state.limits`` what ``/health`` says of
    the limits.

    max_chars (Optional[int]): the longest text (413 beyond); None: ``default_max_chars``.
    max_batch (int): most texts in one ``nlp.pipe`` batch, and in one request.
    wait_ms (float): how long a batch waits for more requests.
    max_queue (int): most texts waiting, in all lanes; a request past it gets 503 and Retry-After at once.
    max_response_mb (float): the largest response body (413 beyond, before it is encoded).
    long_chars (int): a request whose texts hold more characters together waits in the long lane,
        the others in the short lane; 0: one lane for all.
    torch_threads (Optional[int]): what ``/health`` reports as torch's threads (default: torch's now).
    side_by_side (bool): whether the two lanes may run ``nlp`` at the same time; False for a
        pipeline holding a component of your own that is not safe from two threads (the package's
        are), and the lanes take turns, one batch at a time.
    """
    from contextlib import asynccontextmanager

    from fastapi import FastAPI, Request
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse, Response
    from starlette.exceptions import HTTPException
    from starlette.requests import ClientDisconnect

    if (max_chars is not None and max_chars < 1) or max_response_mb <= 0 or long_chars < 0:
        raise ValueError(f"max_chars ({max_chars}) and max_response_mb ({max_response_mb}) must be positive, "
                         f"long_chars ({long_chars}) 0 or positive")
    max_bytes = int(max_response_mb * 2**20)
    served = warm_up(nlp)
    tokens = answer_tokens(served.width, served.n_layers, max_bytes)
    chosen = max_chars is not None
    max_chars = max_chars if max_chars is not None else default_max_chars(tokens)
    metrics = Metrics(max_queue)
    batcher = Lanes(nlp, long_chars=long_chars, max_batch=max_batch, wait_ms=wait_ms, max_queue=max_queue,
                    metrics=metrics, side_by_side=side_by_side)
    limit = body_limit(max_chars, max_batch)
    limits = {"width": served.width, "max_chars": max_chars, "max_response_bytes": max_bytes, "answer_tokens": tokens,
              "long_chars": long_chars, "lanes_side_by_side": batcher.side_by_side}
    _log_limits(limits, chosen, served)
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
    app.state.limits = limits

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
                "torch_threads": torch_threads, "limits": limits}

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
            answer = await batcher.submit(parsed.texts, _encoder(parsed, fmt, gzip_ok, max_bytes, served),
                                          request.is_disconnected, _size_check(nlp, parsed, fmt, max_bytes, served))
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


def _log_limits(limits: Dict[str, Any], chosen: bool, served: Served) -> None:
    tokens = limits["answer_tokens"]
    if not limits["long_chars"]:
        lanes = "one lane"
    elif limits["lanes_side_by_side"]:
        lanes = f"a short and a long lane side by side (long: over {limits['long_chars']} characters a request)"
    else:
        lanes = "a short and a long lane taking turns, as asked (make_app's side_by_side=False)"
    LOG.info("width %d: an answer within %d bytes holds %d tokens of the mixed vector, %d with the layers (JSON, "
             "base64; msgpack: %d and %d); texts of at most %d characters (%s); %s; annotations: %s",
             limits["width"], limits["max_response_bytes"], tokens["base64"]["mixed"], tokens["base64"]["layers"],
             tokens["msgpack"]["mixed"], tokens["msgpack"]["layers"], limits["max_chars"],
             "as given" if chosen else (f"the default: what the mixed vector's answer holds at {CHARS_PER_TOKEN} "
                                         f"characters a token, at most {MAX_CHARS}"),
             lanes, ", ".join(ANSWER_KEYS[kind] for kind in served.annotations) or "none")


def _encoder(parsed: EmbedRequest, fmt: str, gzip_ok: bool, max_bytes: int, served: Served):
    """Docs -> the request's Answer, run in the worker thread: the arrays, and the annotations the
    pipeline sets."""

    def encode(docs: List[Any]) -> Answer:
        results = [{**doc_arrays(doc, parsed.layers), **doc_annotations(doc, served.annotations)} for doc in docs]
        body = encode_response(results, single=parsed.single, fmt=fmt, encoding=parsed.encoding, max_bytes=max_bytes)
        packed = maybe_gzip(body, gzip_ok)
        tokens = sum(len(doc) for doc in docs)
        return Answer(body, tokens) if packed is None else Answer(packed, tokens, gzipped=True)

    return encode


def _size_check(nlp: Any, parsed: EmbedRequest, fmt: str, max_bytes: int, served: Served):
    """Texts -> None, or 413 when their answer would pass the limit: run in the worker thread before
    they are computed (the tokenizer is cheap, the biLM on thousands of tokens is not), by the widths
    of the warm-up."""

    def check(texts: List[str]) -> None:
        tokens = sum(len(nlp.make_doc(text)) for text in texts)
        floats = served.width * (1 + (served.n_layers if parsed.layers else 0))
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
