"""The served pipeline's queue: requests batched into ``nlp.pipe``, the queue bounded, work for clients
that left dropped, and a batch that fails retried request by request so that only the bad one fails.

Requests wait in a bounded queue (``max_queue`` texts). One task takes the first request and whatever
else arrives within ``wait_ms`` (up to ``max_batch`` texts), drops those whose clients have
disconnected, and runs the rest through ``nlp.pipe`` in one worker thread, which also encodes each
response, so the event loop keeps accepting requests while the biLM runs and the model runs one batch
at a time. A request that would take the queue past its bound is refused at once (``Overloaded``).
"""
import asyncio
import math
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Deque, List, Optional, Tuple, Union

from .serve_body import RequestError
from .serve_metrics import Metrics

MAX_BATCH = 32
WAIT_MS = 5.0
MAX_QUEUE = 256


class Overloaded(RequestError):
    """The queue is full: answered 503 at once, with Retry-After."""

    def __init__(self, waiting: int, max_queue: int, retry_after: int) -> None:
        super().__init__(503, f"the server is busy: {waiting} texts wait, the queue holds {max_queue}; retry after "
                              f"{retry_after} s", headers={"Retry-After": str(retry_after)})


class ClientGone(RequestError):
    """The client left before its texts were computed: its work is dropped, and the request is logged
    and counted with 499 (nginx's "client closed request"; no answer reaches it)."""

    def __init__(self) -> None:
        super().__init__(499, "the client left before its texts were computed")


@dataclass
class Answer:
    """A request's encoded body and the tokens it held."""

    body: bytes
    tokens: int
    gzipped: bool = False


# docs -> the response body (run in the worker thread; may raise RequestError for this request alone)
Encoder = Callable[[List[Any]], Answer]


@dataclass
class Job:
    texts: List[str]
    encode: Encoder
    disconnected: Callable[[], Awaitable[bool]]
    future: "asyncio.Future[Answer]" = field(default=None)  # type: ignore[assignment]
    check: Optional[Callable[[List[str]], None]] = None  # raises RequestError to refuse before compute


class Batcher:
    """Collects requests for up to ``wait_ms`` (at most ``max_batch`` texts) and runs them through
    ``nlp.pipe``; at most ``max_queue`` texts wait."""

    def __init__(self, nlp: Any, *, max_batch: int = MAX_BATCH, wait_ms: float = WAIT_MS,
                 max_queue: int = MAX_QUEUE, metrics: Optional[Metrics] = None) -> None:
        if max_batch < 1 or max_queue < 1 or wait_ms < 0:
            raise ValueError(f"max_batch ({max_batch}) and max_queue ({max_queue}) must be positive, wait_ms "
                             f"({wait_ms}) at least 0")
        self.nlp = nlp
        self.max_batch = max_batch
        self.max_queue = max_queue
        self.wait_s = wait_ms / 1000.0
        self.metrics = metrics if metrics is not None else Metrics()
        self._jobs: Deque[Job] = deque()
        self._waiting = 0  # texts in the queue, not yet taken into a batch
        self._arrived: Optional[asyncio.Event] = None
        self._task: Optional[asyncio.Task] = None
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="elmo-pipe")

    @property
    def waiting(self) -> int:
        """Texts waiting in the queue."""
        return self._waiting

    @property
    def full(self) -> bool:
        return self._waiting >= self.max_queue

    async def start(self) -> None:
        self._arrived = asyncio.Event()
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
        self._worker.shutdown(wait=False)

    async def submit(self, texts: List[str], encode: Encoder, disconnected: Callable[[], Awaitable[bool]],
                     check: Optional[Callable[[List[str]], None]] = None) -> Answer:
        """The answer to ``texts``, batched with other requests' texts; ``Overloaded`` at once when
        they would take the queue past ``max_queue``.

        encode (Encoder): the request's Docs to its answer, in the worker thread.
        disconnected: whether the client has gone (asked before its texts are computed).
        check: run on the texts in the worker thread before they are computed; what it raises is
            the request's answer, and its texts are not computed.
        """
        assert self._arrived is not None, "Batcher.start() first"
        if self._waiting + len(texts) > self.max_queue and self._waiting > 0:
            self.metrics.rejected_overload += 1
            raise Overloaded(self._waiting, self.max_queue, self.retry_after())
        job = Job(texts, encode, disconnected, asyncio.get_running_loop().create_future(), check)
        self._jobs.append(job)
        self._waiting += len(texts)
        self.metrics.queue_depth = self._waiting
        self._arrived.set()
        return await job.future

    def retry_after(self) -> int:
        """Whole seconds until the queue has likely drained, by the recent seconds a text took (1 to 60)."""
        per_text = self.metrics.seconds_per_text()
        return int(min(60, max(1, math.ceil(self._waiting * per_text))))

    async def _next_batch(self) -> List[Job]:
        assert self._arrived is not None
        loop = asyncio.get_running_loop()
        while not self._jobs:
            self._arrived.clear()
            await self._arrived.wait()
        batch = [self._take()]
        size = len(batch[0].texts)
        deadline = loop.time() + self.wait_s
        while size < self.max_batch:
            if not self._jobs:
                remaining = deadline - loop.time()
                if remaining <= 0:
                    break
                self._arrived.clear()
                try:
                    await asyncio.wait_for(self._arrived.wait(), remaining)
                except asyncio.TimeoutError:
                    break
                continue
            if size + len(self._jobs[0].texts) > self.max_batch:
                break
            batch.append(self._take())
            size += len(batch[-1].texts)
        return batch

    def _take(self) -> Job:
        job = self._jobs.popleft()
        self._waiting -= len(job.texts)
        self.metrics.queue_depth = self._waiting
        return job

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            batch = await self._next_batch()
            live = []
            for job in batch:
                if job.future.done():  # its request was cancelled while it waited
                    continue
                if await job.disconnected():
                    self.metrics.dropped_disconnected += 1
                    if not job.future.done():
                        job.future.set_exception(ClientGone())
                else:
                    live.append(job)
            if not live:
                continue
            started = time.perf_counter()
            outcomes, texts = await loop.run_in_executor(self._worker, self._compute, live)
            if texts:
                self.metrics.batch_done(texts, time.perf_counter() - started)
            for job, outcome in zip(live, outcomes):
                if job.future.done():
                    continue
                if isinstance(outcome, BaseException):
                    job.future.set_exception(outcome)
                else:
                    job.future.set_result(outcome)

    def _compute(self, jobs: List[Job]) -> Tuple[List[Union[Answer, BaseException]], int]:
        """Each job's answer or error, and the texts computed: those their check refuses are not
        computed (nor counted in the batch), the others run as ``_computed`` runs them."""
        refused = {id(job): err for job in jobs if (err := _refusal(job)) is not None}
        live = [job for job in jobs if id(job) not in refused]
        answers = dict(zip(map(id, live), self._computed(live) if live else []))
        outcomes = [refused[id(job)] if id(job) in refused else answers[id(job)] for job in jobs]
        return outcomes, sum(len(job.texts) for job in live)

    def _computed(self, jobs: List[Job]) -> List[Union[Answer, BaseException]]:
        """Each job's answer or error: the batch in one ``nlp.pipe``; if that raises, each job on its
        own, so a request the pipeline fails on fails alone."""
        try:
            texts = [t for job in jobs for t in job.texts]
            docs = list(self.nlp.pipe(texts, batch_size=len(texts)))
        except Exception:  # a request in the batch breaks the pipeline: find it by running each alone
            self.metrics.batches_retried += 1
            return [self._alone(job) for job in jobs]
        outcomes: List[Union[Answer, BaseException]] = []
        start = 0
        for job in jobs:
            outcomes.append(_encoded(job, docs[start:start + len(job.texts)]))
            start += len(job.texts)
        return outcomes

    def _alone(self, job: Job) -> Union[Answer, BaseException]:
        try:
            docs = list(self.nlp.pipe(job.texts, batch_size=len(job.texts)))
        except Exception as err:  # this request's own failure: a 500 for it, the others go on
            return err
        return _encoded(job, docs)


def _refusal(job: Job) -> Optional[BaseException]:
    try:
        if job.check is not None:
            job.check(job.texts)
    except Exception as err:  # refused before it is computed: an answer over the limit
        return err
    return None


def _encoded(job: Job, docs: List[Any]) -> Union[Answer, BaseException]:
    try:
        return job.encode(docs)
    except Exception as err:  # an answer too large for the limit, or values JSON cannot carry
        return err

