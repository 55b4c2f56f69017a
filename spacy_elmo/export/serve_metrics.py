"""The served pipeline's counters, as ``GET /metrics`` gives them (Prometheus' text format, or JSON
with ``Accept: application/json``): requests by status, texts and tokens, batches and their sizes,
the queue, requests refused for overload, work dropped for clients that left, batches retried one
request at a time, latency quantiles over the most recent requests, and per lane (``serve_queue``)
its queue, batches and texts."""
from collections import Counter, deque
from typing import Any, Deque, Dict, List, Optional

import numpy as np

LATENCY_WINDOW = 2048  # the quantiles are over this many most recent requests
QUANTILES = (0.5, 0.95, 0.99)
RECENT_BATCHES = 64  # Retry-After's pace is over this many most recent batches of a lane
ONE_LANE = "all"  # the lane of a server whose requests all wait in one queue


class Metrics:
    """What the server has done so far (updated on the event loop; read by ``/metrics``, ``/health``)."""

    def __init__(self, max_queue: int = 0) -> None:
        self.max_queue = max_queue
        self.lane_depth: Dict[str, int] = {}  # lane -> texts waiting in its queue
        self.lane_batches: Counter = Counter()  # lane -> batches it ran
        self.lane_texts: Counter = Counter()  # lane -> texts its batches ran
        self.requests: Counter = Counter()  # status -> count
        self.texts = 0
        self.tokens = 0
        self.batch_sizes: Counter = Counter()  # texts in a batch -> batches of that size
        self.rejected_overload = 0
        self.dropped_disconnected = 0
        self.batches_retried = 0
        self._latencies: Deque[float] = deque(maxlen=LATENCY_WINDOW)
        self._recent: Dict[str, Deque] = {}  # lane -> (texts, seconds) of its recent batches

    def add_lane(self, lane: str) -> None:
        """Count ``lane`` from now on (shown with zeros before its first batch)."""
        self.lane_depth.setdefault(lane, 0)
        self._recent.setdefault(lane, deque(maxlen=RECENT_BATCHES))

    def lane_queued(self, lane: str, waiting: int) -> None:
        """``lane``'s queue now holds ``waiting`` texts."""
        self.lane_depth[lane] = waiting

    @property
    def queue_depth(self) -> int:
        """Texts waiting, every lane's together."""
        return sum(self.lane_depth.values())

    @property
    def batches(self) -> int:
        return sum(self.batch_sizes.values())

    @property
    def batched_texts(self) -> int:
        return sum(size * count for size, count in self.batch_sizes.items())

    def batch_done(self, texts: int, seconds: float, lane: str = ONE_LANE) -> None:
        self.add_lane(lane)
        self.batch_sizes[texts] += 1
        self.lane_batches[lane] += 1
        self.lane_texts[lane] += texts
        self._recent[lane].append((texts, seconds))

    def request_done(self, status: int, seconds: float, texts: int, tokens: int) -> None:
        self.requests[status] += 1
        self._latencies.append(seconds)
        if status == 200:
            self.texts += texts
            self.tokens += tokens

    def seconds_per_text(self, lane: Optional[str] = None) -> float:
        """The mean seconds a text took over the recent batches of ``lane`` (None: of every lane; 0
        before the first)."""
        recent = [batch for name, batches in self._recent.items() if lane in (None, name) for batch in batches]
        texts = sum(n for n, _ in recent)
        return sum(s for _, s in recent) / texts if texts else 0.0

    def latency_quantiles(self) -> Dict[str, float]:
        """p50, p95, p99 of the recent requests' latency in seconds (0 before the first)."""
        if not self._latencies:
            return {f"p{round(q * 100)}": 0.0 for q in QUANTILES}
        values = np.quantile(np.fromiter(self._latencies, dtype=np.float64), QUANTILES)
        return {f"p{round(q * 100)}": float(v) for q, v in zip(QUANTILES, values)}

    def snapshot(self) -> Dict[str, Any]:
        """Every counter as JSON."""
        batches = self.batches
        return {
            "requests": {str(status): n for status, n in sorted(self.requests.items())},
            "errors": sum(n for status, n in self.requests.items() if status >= 400),
            "texts": self.texts,
            "tokens": self.tokens,
            "batches": batches,
            "batch_size_mean": self.batched_texts / batches if batches else 0.0,
            "batch_sizes": {str(size): n for size, n in sorted(self.batch_sizes.items())},
            "queue_depth": self.queue_depth,
            "queue_limit": self.max_queue,
            "rejected_overload": self.rejected_overload,
            "dropped_disconnected": self.dropped_disconnected,
            "batches_retried": self.batches_retried,
            "latency_seconds": self.latency_quantiles(),
            "lanes": {lane: {"queue_depth": depth, "batches": self.lane_batches[lane], "texts": self.lane_texts[lane]}
                      for lane, depth in self.lane_depth.items()},
        }

    def prometheus(self) -> str:
        """The counters in Prometheus' text exposition format (0.0.4)."""
        lines: List[str] = []

        def metric(name: str, kind: str, help_text: str, samples: List[str]) -> None:
            lines.extend([f"# HELP elmo_{name} {help_text}", f"# TYPE elmo_{name} {kind}", *samples])

        metric("requests_total", "counter", "Requests answered, by HTTP status.",
               [f'elmo_requests_total{{status="{s}"}} {n}' for s, n in sorted(self.requests.items())])
        metric("texts_total", "counter", "Texts answered with 200.", [f"elmo_texts_total {self.texts}"])
        metric("tokens_total", "counter", "Tokens answered with 200.", [f"elmo_tokens_total {self.tokens}"])
        metric("batch_size", "summary", "Texts a batch ran.",
               [f"elmo_batch_size_count {self.batches}", f"elmo_batch_size_sum {self.batched_texts}"])
        metric("queue_depth", "gauge", "Texts waiting in the queue.", [f"elmo_queue_depth {self.queue_depth}"])
        metric("queue_limit", "gauge", "Texts the queue holds at most.", [f"elmo_queue_limit {self.max_queue}"])
        metric("rejected_overload_total", "counter", "Requests refused with 503: the queue was full.",
               [f"elmo_rejected_overload_total {self.rejected_overload}"])
        metric("dropped_disconnected_total", "counter", "Requests dropped before compute: the client had left.",
               [f"elmo_dropped_disconnected_total {self.dropped_disconnected}"])
        metric("batches_retried_total", "counter", "Batches that raised and were run again one request at a time.",
               [f"elmo_batches_retried_total {self.batches_retried}"])
        metric("lane_queue_depth", "gauge", "Texts waiting in a lane's queue.",
               [f'elmo_lane_queue_depth{{lane="{lane}"}} {depth}' for lane, depth in self.lane_depth.items()])
        metric("lane_batches_total", "counter", "Batches a lane ran.",
               [f'elmo_lane_batches_total{{lane="{lane}"}} {self.lane_batches[lane]}' for lane in self.lane_depth])
        metric("lane_texts_total", "counter", "Texts a lane's batches ran.",
               [f'elmo_lane_texts_total{{lane="{lane}"}} {self.lane_texts[lane]}' for lane in self.lane_depth])
        quantiles = self.latency_quantiles()
        metric("request_latency_seconds", "summary", f"Latency of the last {LATENCY_WINDOW} requests at most.",
               [f'elmo_request_latency_seconds{{quantile="{q}"}} {v}' for q, v in zip(QUANTILES, quantiles.values())] + [f"elmo_request_latency_seconds_count {sum(self.requests.values())}"])
        return "\n".join(lines) + "\n"
