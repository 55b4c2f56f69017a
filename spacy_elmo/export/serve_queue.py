"""The served pipeline's queue: requests batched into ``nlp.pipe``, the queue bounded, work for clients
that left dropped, a batch that fails retried request by request so that only the bad one fails, and
short requests kept apart from long ones.

Requests wait in a bounded queue (``max_queue`` texts, every lane's together). ``Lanes`` routes a
request by its size: one whose texts hold more than ``long_chars`` characters together waits in the
long lane, the others in the short lane. Each lane is a ``Batcher``: one task takes the lane's first
request and whatever else arrives within ``wait_ms`` (up to ``max_batch`` texts), drops those whose
clients have disconnected, and runs the rest through ``nlp.pipe`` in the lane's own worker thread,
which also encodes each response. The event loop keeps accepting requests while the biLM runs, and a
short request is computed beside a long text's batch instead of after it: each lane runs one batch at
a time, the two lanes the same ``nlp`` at the same time (the package's inference keeps per-thread
buffers and locks its shared caches; lanes asked to take turns, for a pipeline holding a component
that is not safe from two threads, run one batch at a time). A request that would take the queue past its bound is
refused at once (``Overloaded``).
"""
import asyncio
import math
import threading
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Deque, Dict, List, Optional, Tuple, Union

from .serve_body import RequestError
from .serve_metrics import ONE_LANE, Metrics

MAX_BATCH = 32
WAIT_MS = 5.0
MAX_QUEUE = 256
# a request whose texts hold more characters than this together waits in the long lane (about 200
# tokens of English: a paragraph; beyond it, documents)
LONG_CHARS = 1_000
SHORT, LONG = "short", "long"


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
    ``nlp.pipe`` in a worker thread of its own; at most ``max_queue`` texts wait.

    lane (str): its name in the metrics.
    turn (Optional[threading.Lock]): held around each ``nlp.pipe`` where lanes must take turns.
    """

    def __init__(self, nlp: Any, *, max_batch: int = MAX_BATCH, wait_ms: float = WAIT_MS,
                 max_queue: int = MAX_QUEUE, metrics: Optional[Metrics] = None, lane: str = ONE_LANE,
                 turn: Optional[Any] = None) -> None:
        if max_batch < 1 or max_queue < 1 or wait_ms < 0:
            raise ValueError(f"max_batch ({max_batch}) and max_queue ({max_queue}) must be positive, wait_ms "
                             f"({wait_ms}) at least 0")
        self.nlp = nlp
        self.max_batch = max_batch
        self.max_queue = max_queue
        self.wait_s = wait_ms / 1000.0
        self.metrics = metrics if metrics is not None else Metrics()
        self.lane = lane
        self.metrics.add_lane(lane)
        self.turn = turn
        self.waiting_for_turn = 0  # batches of this lane taken and waiting for the other lane's to end
        self._jobs: Deque[Job] = deque()
        self._waiting = 0  # texts in the queue, not yet taken into a batch
        self._arrived: Optional[asyncio.Event] = None
        self._task: Optional[asyncio.Task] = None
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"elmo-pipe-{lane}")

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
        self.metrics.lane_queued(self.lane, self._waiting)
        self._arrived.set()
        return await job.future

    def drain_seconds(self) -> float:
        """Seconds until the queue has likely drained, by the recent seconds a text of this lane took."""
        return self._waiting * self.metrics.seconds_per_text(self.lane)

    def retry_after(self) -> int:
        """Whole seconds until the queue has likely drained (1 to 60)."""
        return _whole_seconds(self.drain_seconds())

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
        self.metrics.lane_queued(self.lane, self._waiting)
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
            outcomes, texts, retried = await loop.run_in_executor(self._worker, self._compute, live)
            if texts:
                self.metrics.batch_done(texts, time.perf_counter() - started, self.lane)
            self.metrics.batches_retried += retried
            for job, outcome in zip(live, outcomes):
                if job.future.done():
                    continue
                if isinstance(outcome, BaseException):
                    job.future.set_exception(outcome)
                else:
                    job.future.set_result(outcome)

    def _compute(self, jobs: List[Job]) -> Tuple[List[Union[Answer, BaseException]], int, int]:
        """Each job's answer or error, the texts computed and the batches retried (0 or 1), in the
        worker thread: those their check refuses are not computed (nor counted in the batch), the
        others run as ``_computed`` runs them, on this lane's turn where the lanes take turns."""
        refused = {id(job): err for job in jobs if (err := _refusal(job)) is not None}
        live = [job for job in jobs if id(job) not in refused]
        computed, retried = self._on_turn(live) if live else ([], 0)
        answers = dict(zip(map(id, live), computed))
        outcomes = [refused[id(job)] if id(job) in refused else answers[id(job)] for job in jobs]
        return outcomes, sum(len(job.texts) for job in live), retried

    def _on_turn(self, jobs: List[Job]) -> Tuple[List[Union[Answer, BaseException]], int]:
        if self.turn is None:
            return self._computed(jobs)
        self.waiting_for_turn += 1
        with self.turn:
            self.waiting_for_turn -= 1
            return self._computed(jobs)

    def _computed(self, jobs: List[Job]) -> Tuple[List[Union[Answer, BaseException]], int]:
        """Each job's answer or error: the batch in one ``nlp.pipe``; if that raises, each job on its
        own, so a request the pipeline fails on fails alone (and 1: the batch was retried)."""
        try:
            texts = [t for job in jobs for t in job.texts]
            docs = list(self.nlp.pipe(texts, batch_size=len(texts)))
        except Exception:  # a request in the batch breaks the pipeline: find it by running each alone
            return [self._alone(job) for job in jobs], 1
        outcomes: List[Union[Answer, BaseException]] = []
        start = 0
        for job in jobs:
            outcomes.append(_encoded(job, docs[start:start + len(job.texts)]))
            start += len(job.texts)
        return outcomes, 0

    def _alone(self, job: Job) -> Union[Answer, BaseException]:
        try:
            docs = list(self.nlp.pipe(job.texts, batch_size=len(job.texts)))
        except Exception as err:  # this request's own failure: a 500 for it, the others go on
            return err
        return _encoded(job, docs)


class Lanes:
    """Requests routed by size to lanes that run side by side, each a ``Batcher`` with its own queue
    and worker thread, all calling the same ``nlp.pipe``; at most ``max_queue`` texts wait in all.

    long_chars (int): a request whose texts hold more characters than this together goes to the
        long lane, the others to the short lane; 0: one lane for every request (``ONE_LANE``).
    side_by_side (bool): whether the lanes may run the pipeline at the same time (False: they take
        turns, one batch at a time, as where the pipeline is not safe from two threads).
    The rest as ``Batcher`` takes them.
    """

    def __init__(self, nlp: Any, *, long_chars: int = LONG_CHARS, max_batch: int = MAX_BATCH,
                 wait_ms: float = WAIT_MS, max_queue: int = MAX_QUEUE, metrics: Optional[Metrics] = None,
                 side_by_side: bool = True) -> None:
        if long_chars < 0:
            raise ValueError(f"long_chars ({long_chars}) must be 0 (one lane) or positive")
        self.metrics = metrics if metrics is not None else Metrics(max_queue)
        self.long_chars = long_chars
        self.max_queue = max_queue
        names = (SHORT, LONG) if long_chars else (ONE_LANE,)
        self.side_by_side = side_by_side or len(names) == 1
        turn = None if self.side_by_side else threading.Lock()
        self.lanes: Dict[str, Batcher] = {
            name: Batcher(nlp, max_batch=max_batch, wait_ms=wait_ms, max_queue=max_queue, metrics=self.metrics,
                          lane=name, turn=turn) for name in names}

    @property
    def waiting(self) -> int:
        """Texts waiting, every lane's together."""
        return sum(lane.waiting for lane in self.lanes.values())

    @property
    def full(self) -> bool:
        return self.waiting >= self.max_queue

    def lane_of(self, texts: List[str]) -> Batcher:
        """The lane a request of ``texts`` waits in."""
        if not self.long_chars:
            return self.lanes[ONE_LANE]
        return self.lanes[LONG if sum(map(len, texts)) > self.long_chars else SHORT]

    async def start(self) -> None:
        for lane in self.lanes.values():
            await lane.start()

    async def stop(self) -> None:
        for lane in self.lanes.values():
            await lane.stop()

    async def submit(self, texts: List[str], encode: Encoder, disconnected: Callable[[], Awaitable[bool]],
                     check: Optional[Callable[[List[str]], None]] = None) -> Answer:
        """As ``Batcher.submit``, in the request's lane; ``Overloaded`` at once when ``texts`` would
        take the lanes' queues together past ``max_queue``."""
        if self.waiting + len(texts) > self.max_queue and self.waiting > 0:
            self.metrics.rejected_overload += 1
            raise Overloaded(self.waiting, self.max_queue, self.retry_after())
        return await self.lane_of(texts).submit(texts, encode, disconnected, check)

    def retry_after(self) -> int:
        """Whole seconds until every lane has likely drained (side by side, or one after the other
        where they take turns; 1 to 60)."""
        seconds = [lane.drain_seconds() for lane in self.lanes.values()]
        return _whole_seconds(max(seconds) if self.side_by_side else sum(seconds))


def _whole_seconds(seconds: float) -> int:
    return int(min(60, max(1, math.ceil(seconds))))


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

