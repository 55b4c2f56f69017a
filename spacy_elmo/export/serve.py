"""A spaCy pipeline's ELMo layers over HTTP (FastAPI), concurrent requests batched into ``nlp.pipe``.

    import spacy, spacy_elmo, uvicorn
    from spacy_elmo.export.serve import make_app
    nlp = spacy.blank("en"); nlp.add_pipe("elmo")      # or spacy.load(a pipeline with an elmo component)
    uvicorn.run(make_app(nlp), host="127.0.0.1", port=8000)

``POST /embed`` with ``{"text": "..."}`` answers ``{"tokens": [...], "mixed": [[...]], "layers": [[[...]]]}``:
``doc._.elmo.mixed`` (n_tokens, width) and, unless ``"layers": false``, ``doc._.elmo.layers``
(L+1, n_tokens, width), float32 values as JSON numbers (exact: a float32 survives the round trip).
``GET /health`` answers ``{"status": "ok", "batches": B, "texts": N}`` (the batches run so far, and their texts). A body that is not that JSON gets 422, a text over
``max_chars`` 413, each with ``{"error": "one line"}``; the server goes on serving.

Batching (``Batcher``): requests wait in an asyncio queue; one task takes the first and whatever
else arrives within ``wait_ms`` (up to ``max_batch`` texts) and runs them through ``nlp.pipe`` in
one worker thread, so the event loop keeps accepting requests while the biLM runs, and the model
runs one batch at a time. This module needs the ``serve`` extra (fastapi, uvicorn); it takes any
``nlp`` whose Docs get ``doc._.elmo`` and imports nothing else of the package.
"""
import asyncio
import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Dict, List, Optional, Tuple

MAX_CHARS = 20_000
MAX_BATCH = 32
WAIT_MS = 5.0


def doc_payload(doc: Any, layers: bool = True) -> Dict[str, Any]:
    """What ``/embed`` answers for a Doc (also the offline result a response is checked against)."""
    elmo = doc._.elmo
    payload: Dict[str, Any] = {"tokens": [t.text for t in doc], "mixed": elmo.mixed.tolist()}
    if layers:
        payload["layers"] = elmo.layers.tolist()
    return payload


class Batcher:
    """Collects texts for up to ``wait_ms`` (at most ``max_batch``) and runs them through ``nlp.pipe``."""

    def __init__(self, nlp: Any, *, max_batch: int = MAX_BATCH, wait_ms: float = WAIT_MS) -> None:
        self.nlp = nlp
        self.max_batch = max_batch
        self.wait_s = wait_ms / 1000.0
        self.batches: List[int] = []  # the size of each batch run, for the load test's record
        self._queue: Optional[asyncio.Queue] = None
        self._task: Optional[asyncio.Task] = None
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="elmo-pipe")

    async def start(self) -> None:
        self._queue = asyncio.Queue()
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
        self._worker.shutdown(wait=False)

    async def embed(self, text: str, layers: bool) -> bytes:
        """The JSON body of ``doc_payload(nlp(text), layers)``, the text batched with others."""
        assert self._queue is not None, "Batcher.start() first"
        future = asyncio.get_running_loop().create_future()
        await self._queue.put((text, layers, future))
        return await future

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        assert self._queue is not None
        while True:
            batch = [await self._queue.get()]
            deadline = loop.time() + self.wait_s
            while len(batch) < self.max_batch:
                remaining = deadline - loop.time()
                if remaining <= 0:
                    break
                try:
                    batch.append(await asyncio.wait_for(self._queue.get(), remaining))
                except asyncio.TimeoutError:
                    break
            self.batches.append(len(batch))
            try:
                payloads = await loop.run_in_executor(self._worker, self._pipe, batch)
            except Exception as err:  # the batch's requests fail, the server goes on
                for _, _, future in batch:
                    if not future.done():
                        future.set_exception(err)
                continue
            for (_, _, future), payload in zip(batch, payloads):
                if not future.done():
                    future.set_result(payload)

    def _pipe(self, batch: List[Tuple[str, bool, Any]]) -> List[bytes]:
        """The batch's response bodies, JSON-encoded here in the worker thread: encoding thousands of
        floats a response on the event loop would hold back the requests arriving meanwhile."""
        docs = self.nlp.pipe([text for text, _, _ in batch], batch_size=len(batch))
        return [json.dumps(doc_payload(doc, layers)).encode("utf-8") for doc, (_, layers, _) in zip(docs, batch)]


def make_app(nlp: Any, *, max_chars: int = MAX_CHARS, max_batch: int = MAX_BATCH, wait_ms: float = WAIT_MS):
    """The FastAPI app serving ``nlp``; its ``state.batcher`` is the ``Batcher``."""
    from contextlib import asynccontextmanager

    from fastapi import FastAPI, Request
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse, Response
    from pydantic import BaseModel, StrictBool, StrictStr

    batcher = Batcher(nlp, max_batch=max_batch, wait_ms=wait_ms)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        await batcher.start()
        yield
        await batcher.stop()

    app = FastAPI(title="spacy-elmo", lifespan=lifespan)
    app.state.batcher = batcher

    class EmbedRequest(BaseModel):
        text: StrictStr
        layers: StrictBool = True

    @app.exception_handler(RequestValidationError)
    async def malformed(request: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {}
        if first.get("type") == "json_invalid":
            where = "the body is not JSON"
        else:
            where = ".".join(str(p) for p in first.get("loc", ()) if p != "body") or "body"
        message = f"malformed request: {where}: {first.get('msg', 'invalid')}; send {{\"text\": \"...\"}}"
        return JSONResponse(status_code=422, content={"error": message})

    @app.get("/health")
    async def health() -> Dict[str, Any]:
        return {"status": "ok", "batches": len(batcher.batches), "texts": sum(batcher.batches)}

    @app.post("/embed")
    async def embed(request: EmbedRequest):
        if len(request.text) > max_chars:
            return JSONResponse(status_code=413, content={
                "error": f"text of {len(request.text)} characters is over the limit of {max_chars}"})
        # the body as the worker encoded it: FastAPI's encoder would walk every float again, on the loop
        return Response(content=await batcher.embed(request.text, request.layers), media_type="application/json")

    return app


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
