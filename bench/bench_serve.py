"""Load benchmark of ``python -m spacy_elmo serve`` as production runs it: requests a second and latency
quantiles at 1, 8 and 32 clients for each model and body format, the bytes a token of every body, an
overload run, the threads compared, and the server's resident memory over many requests.

    python -m bench.bench_serve --shapes shipped,full --json results/export/amd-f25-m17/serve-bench.json
    python -m bench.bench_serve --quick          # the tiny shape, a few requests: seconds

Each server is ``python -m spacy_elmo serve`` in a process of its own (the shipped biLM, or a published
shape with random weights written as a published pair and served with ``--options --weights``), with
its defaults unless a part says otherwise; the clients are asyncio tasks of this process (httpx) on the
same machine, each sending one request after another, a text of EWT's train sample each (10 to 40
words), until ``--requests`` are sent. Parts of the record:

- ``shapes.SHAPE.levels.FORMAT[i]``: ``clients``, ``requests``, ``requests_per_s``, ``tokens_per_s``,
  ``latency_ms.p50/p95/p99``, ``bytes_per_token``, ``statuses``; FORMAT ``json`` (the default body:
  the mixed vector in base64) or ``msgpack`` (``Accept: application/msgpack``).
- ``shapes.SHAPE.sizes``: one sentence of 24 tokens in every body the server writes: ``bytes``,
  ``bytes_per_token`` and ``over_raw`` (the body over its arrays' float32 bytes).
- ``overload``: a server with a short queue (``--overload-queue``) and batches shorter than it
  (``--overload-batch``) sent ``--overload-requests`` requests at once by clients that give up after
  ``--overload-timeout`` s: how many got 200, 503 (and how fast), or timed out, what the server
  computed and dropped (its ``/metrics``), and ``probes``: requests sent one at a time on an open
  connection while the queue is full.
- ``threads``: the shipped biLM at 8 clients with ``--threads 1`` and with torch's default.
- ``memory``: the shipped biLM's server RSS every 100 requests over ``--rss-requests`` requests at 8
  clients, with the server's default frozen cache (0 MB) and with the component's default (512 MB).
"""
import argparse
import asyncio
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from bench.workloads import PUBLISHED_NAMES, bench_command, published_bilm, shapes_model, write_report
from lab.serve.load_test import conllu_texts, serve_process
from spacy_elmo.records.provenance import data_record, mark_start, provenance

FORMATS = {"json": {"Accept": "application/json"}, "msgpack": {"Accept": "application/msgpack"}}
# every body the server writes, for the sizes: (name, request fields, headers)
BODIES = [
    ("json, mixed, base64 (the default)", {}, {}),
    ("json, mixed, numbers", {"encoding": "numbers"}, {}),
    ("json, layers, base64", {"layers": True}, {}),
    ("json, layers, numbers (the body before 0.10)", {"layers": True, "encoding": "numbers"}, {}),
    ("msgpack, mixed", {}, {"Accept": "application/msgpack"}),
    ("msgpack, layers", {"layers": True}, {"Accept": "application/msgpack"}),
    ("json, mixed, base64, gzip", {}, {"Accept-Encoding": "gzip"}),
    ("json, layers, numbers, gzip", {"layers": True, "encoding": "numbers"}, {"Accept-Encoding": "gzip"}),
]
SENTENCE_TOKENS = 24


def bench_texts(path: Path, minimum: int = 10, maximum: int = 40) -> List[str]:
    """The ``# text`` lines of a CoNLL-U file of ``minimum`` to ``maximum`` words, in order."""
    return [t for t in conllu_texts(path) if minimum <= len(t.split()) <= maximum]


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


async def send(url: str, texts: Sequence[str], clients: int, headers: Dict[str, str], *,
               timeout: float = 600.0, on_progress=None) -> Dict[str, Any]:
    """``clients`` clients send ``texts`` (each once, in order), one request after another each."""
    import httpx

    latencies: List[float] = []
    order: List[str] = []  # each answer's status, as latencies holds its seconds
    sizes: List[int] = []
    next_index = 0

    async def client(session: "httpx.AsyncClient") -> None:
        nonlocal next_index
        while next_index < len(texts):
            text = texts[next_index]
            next_index += 1
            sent = time.perf_counter()
            try:
                response = await session.post("/embed", json={"text": text}, headers=headers)
                status = str(response.status_code)
                sizes.append(len(response.content))
            except httpx.TimeoutException:
                status = "timeout"
            latencies.append(time.perf_counter() - sent)
            order.append(status)
            if on_progress is not None:
                on_progress(len(latencies))

    started = time.perf_counter()
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(base_url=url, timeout=timeout, limits=limits) as session:
        await asyncio.gather(*(client(session) for _ in range(clients)))
    statuses = {status: order.count(status) for status in sorted(set(order))}
    return {"seconds": time.perf_counter() - started, "latencies": latencies, "order": order, "statuses": statuses,
            "sizes": sizes}


def metrics(url: str) -> Dict[str, Any]:
    import httpx

    return httpx.get(f"{url}/metrics", headers={"Accept": "application/json"}, timeout=30).json()


def quantiles_ms(latencies: Sequence[float]) -> Dict[str, float]:
    ms = np.asarray(latencies, dtype=np.float64) * 1000
    return {f"p{q}": float(np.percentile(ms, q)) for q in (50, 95, 99)} | {"max": float(ms.max())}


def run_level(url: str, texts: Sequence[str], clients: int, fmt: str) -> Dict[str, Any]:
    before = metrics(url)
    sent = asyncio.run(send(url, texts, clients, FORMATS[fmt]))
    after = metrics(url)
    tokens = after["tokens"] - before["tokens"]
    batches = after["batches"] - before["batches"]
    return {
        "clients": clients,
        "requests": len(sent["latencies"]),
        "seconds": sent["seconds"],
        "requests_per_s": len(sent["latencies"]) / sent["seconds"],
        "tokens_per_s": tokens / sent["seconds"],
        "latency_ms": quantiles_ms(sent["latencies"]),
        "bytes_per_token": sum(sent["sizes"]) / max(tokens, 1),
        "mean_batch": (after["texts"] - before["texts"]) / max(batches, 1),
        "statuses": sent["statuses"],
    }


def body_sizes(url: str, text: str) -> Dict[str, Any]:
    """Every body of one sentence: its bytes, bytes a token, and over the raw float32 bytes of its arrays."""
    import httpx

    sizes: Dict[str, Any] = {}
    with httpx.Client(base_url=url, timeout=120) as client:
        plain = client.post("/embed", json={"text": text}).json()
        tokens = len(plain["tokens"])
        width = plain["mixed"]["shape"][1]
        layered = client.post("/embed", json={"text": text, "layers": True}).json()
        n_layers = layered["layers"]["shape"][0]
        for name, fields, headers in BODIES:
            response = client.post("/embed", json={"text": text, **fields},
                                   headers={"Accept-Encoding": "identity", **headers})
            size = len(response.content)  # as sent: httpx's .content is decoded, the header is not
            size = int(response.headers.get("content-length", size))
            raw = tokens * width * 4 * (1 + (n_layers if fields.get("layers") else 0))
            sizes[name] = {"bytes": size, "bytes_per_token": size / tokens, "over_raw": size / raw,
                           "content_encoding": response.headers.get("content-encoding", "identity")}
    return {"tokens": tokens, "width": width, "layers": n_layers, "bodies": sizes}


def sentence_of(url: str, texts: Sequence[str], tokens: int) -> str:
    """The first text the server tokenizes into ``tokens`` tokens."""
    import httpx

    with httpx.Client(base_url=url, timeout=120) as client:
        for text in texts:
            if len(text.split()) <= tokens and len(client.post("/embed", json={"text": text}).json()["tokens"]) == tokens:
                return text
    raise SystemExit(f"no text of {tokens} tokens in the texts")


def model_options(shape: str, workdir: Path) -> List[str]:
    """``serve``'s options for a shape: the shipped biLM, or a published shape's random weights as a pair."""
    if shape == "shipped":
        return []
    published_bilm(shape, workdir)
    return ["--options", str(workdir / f"{shape}_options.json"), "--weights", str(workdir / f"{shape}_weights.hdf5"),
            "--lang", "en"]


def bench_shape(shape: str, options: List[str], texts: List[str], args: argparse.Namespace) -> Dict[str, Any]:
    requests = args.requests if shape != "full" else args.full_requests
    report: Dict[str, Any] = {"name": PUBLISHED_NAMES.get(shape, shape), "levels": {}}
    with serve_process([*options, "--threads", "1"]) as (url, process):
        report["rss_after_start_mb"] = rss_bytes(process.pid) / 2**20
        report["sizes"] = body_sizes(url, sentence_of(url, texts, SENTENCE_TOKENS))
        start = 0
        for fmt in FORMATS:
            report["levels"][fmt] = []
            for clients in args.levels:
                chunk = texts[start:start + requests]
                start = (start + requests) % max(len(texts) - requests, 1)
                report["levels"][fmt].append(run_level(url, chunk, clients, fmt))
                level = report["levels"][fmt][-1]
                print(f"{shape} {fmt} {clients:2d} clients: {level['requests_per_s']:.1f} req/s, p50 "
                      f"{level['latency_ms']['p50']:.0f} ms, p99 {level['latency_ms']['p99']:.0f} ms, "
                      f"{level['bytes_per_token']:.0f} B/token, mean batch {level['mean_batch']:.1f}", flush=True)
    return report


def overload(options: List[str], texts: List[str], args: argparse.Namespace) -> Dict[str, Any]:
    """Many requests at once against a short queue, by clients that give up after a timeout."""
    queue = args.overload_queue
    settings = ["--max-queue", str(queue), "--max-batch", str(args.overload_batch)]
    with serve_process([*options, "--threads", "1", *settings]) as (url, process):
        before = metrics(url)

        async def flood_and_probe():
            flood = asyncio.ensure_future(send(url, texts[:args.overload_requests], args.overload_requests,
                                               FORMATS["json"], timeout=args.overload_timeout))
            return await probe(url, args.overload_probes), await flood

        probes, sent = asyncio.run(flood_and_probe())
        accepted = sent["statuses"].get("200", 0) + sent["statuses"].get("timeout", 0)
        after = settled(url, before, accepted)
    refused = [lat for lat, status in zip(sent["latencies"], sent["order"]) if status == "503"]
    return {
        "queue_limit": queue,
        "max_batch": args.overload_batch,
        "requests": args.overload_requests,
        "client_timeout_s": args.overload_timeout,
        "statuses": sent["statuses"],
        "refused_latency_ms": quantiles_ms(refused) if refused else None,
        "probes": probes,
        "server": {k: after[k] - before[k] for k in ("texts", "rejected_overload", "dropped_disconnected", "batches")},
        "settled": after["settled"],  # every accepted request was answered or dropped before the counts were read
    }


def settled(url: str, before: Dict[str, Any], accepted: int, limit: float = 180.0) -> Dict[str, Any]:
    """The server's metrics once every accepted request was answered or dropped (its clients may have
    left long before: their requests still wait in the queue, or run in the batch they were taken into)."""
    deadline = time.monotonic() + limit
    while True:
        now = metrics(url)
        done = now["texts"] - before["texts"] + now["dropped_disconnected"] - before["dropped_disconnected"]
        if done >= accepted or time.monotonic() > deadline:
            return {**now, "settled": done >= accepted}
        time.sleep(0.5)


async def probe(url: str, count: int) -> Dict[str, Any]:
    """Once the queue is full (``/ready`` answers 503), ``count`` requests one after another on one open
    connection: what a client past the queue bound sees, without the flood's connection setup."""
    import httpx

    async with httpx.AsyncClient(base_url=url, timeout=60) as client:
        deadline = time.monotonic() + 60
        while (await client.get("/ready")).status_code != 503:
            if time.monotonic() > deadline:
                return {"statuses": {}, "note": "the queue never filled"}
            await asyncio.sleep(0.005)
        order, latencies = [], []
        for _ in range(count):
            sent = time.perf_counter()
            response = await client.post("/embed", json={"text": "A request past the queue bound ."})
            latencies.append(time.perf_counter() - sent)
            order.append(str(response.status_code))
    return {"statuses": {s: order.count(s) for s in sorted(set(order))}, "latency_ms": quantiles_ms(latencies)}


def threads(texts: List[str], args: argparse.Namespace) -> Dict[str, Any]:
    """The shipped biLM at 8 clients (json) with one torch thread and with torch's default, interleaved."""
    results: Dict[str, List[Dict[str, Any]]] = {"1": [], "0 (torch's default)": []}
    for round_ in range(args.thread_rounds):
        for name in results:
            with serve_process(["--threads", name.split()[0]]) as (url, _):
                chunk = texts[round_ * args.requests:(round_ + 1) * args.requests] or texts[:args.requests]
                results[name].append(run_level(url, chunk, 8, "json"))
    return {name: {"requests_per_s": [r["requests_per_s"] for r in runs],
                   "p99_ms": [r["latency_ms"]["p99"] for r in runs]} for name, runs in results.items()}


def memory(texts: List[str], args: argparse.Namespace) -> Dict[str, Any]:
    """Server RSS over ``--rss-requests`` requests at 8 clients, frozen cache 0 (the server's) and 512 MB."""
    report: Dict[str, Any] = {"requests": args.rss_requests, "clients": 8}
    for cache in (0, 512):
        with serve_process(["--threads", "1", "--frozen-cache-mb", str(cache)]) as (url, process):
            samples = [rss_bytes(process.pid) / 2**20]

            def sample(done: int) -> None:
                if done % 100 == 0:
                    samples.append(rss_bytes(process.pid) / 2**20)

            chunk = [texts[i % len(texts)] for i in range(args.rss_requests)]
            asyncio.run(send(url, chunk, 8, FORMATS["json"], on_progress=sample))
        report[f"frozen_cache_{cache}_mb"] = {"rss_mb_every_100": samples, "grew_mb": samples[-1] - samples[0]}
        print(f"frozen cache {cache} MB: RSS {samples[0]:.0f} -> {samples[-1]:.0f} MB", flush=True)
    return report


def main(argv: Optional[List[str]] = None) -> Dict[str, Any]:
    args = parse_args(argv)
    command = bench_command("bench.bench_serve", argv)
    mark_start(command)
    texts = bench_texts(args.texts)
    report: Dict[str, Any] = {"load_average": {"before": list(os.getloadavg())}, "texts": len(texts),
                              "levels": args.levels, "shapes": {}}
    started = time.time()
    with tempfile.TemporaryDirectory() as work:
        options = {shape: model_options(shape, Path(work)) for shape in args.shapes}
        for shape in args.shapes:
            report["shapes"][shape] = bench_shape(shape, options[shape], texts, args)
        overload_shape = args.shapes[-1]
        report["overload"] = {"shape": overload_shape, **overload(options[overload_shape], texts, args)}
    print(f"overload: {report['overload']['statuses']}, server {report['overload']['server']}", flush=True)
    if "shipped" in args.shapes and args.thread_rounds:
        report["threads"] = threads(texts, args)
    if "shipped" in args.shapes and args.rss_requests:
        report["memory"] = memory(texts, args)
    report["load_average"]["after"] = list(os.getloadavg())
    report["seconds"] = time.time() - started
    fields = shapes_model(args.shapes)
    report["provenance"] = provenance(command, model=fields["model"], model_note=fields.get("model_note"),
                                      data=data_record([args.texts]))
    write_report(report, None, args.json, None)
    return report


def parse_args(argv: Optional[List[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shapes", default="shipped,full", help="shipped, full (2x4096_512, random weights), tiny")
    parser.add_argument("--levels", default="1,8,32", help="concurrent clients, comma-separated")
    parser.add_argument("--requests", type=int, default=64, help="requests a level")
    parser.add_argument("--full-requests", type=int, default=16, help="requests a level for the full shape")
    parser.add_argument("--overload-requests", type=int, default=200)
    parser.add_argument("--overload-queue", type=int, default=16, help="the overload server's --max-queue")
    parser.add_argument("--overload-batch", type=int, default=8, help="the overload server's --max-batch: a batch "
                        "shorter than the queue, so that queued requests outwait their clients")
    parser.add_argument("--overload-timeout", type=float, default=3.0, help="seconds a client waits in the overload run")
    parser.add_argument("--overload-probes", type=int, default=20, help="requests sent one at a time once the queue is full")
    parser.add_argument("--thread-rounds", type=int, default=3, help="interleaved rounds of the threads comparison")
    parser.add_argument("--rss-requests", type=int, default=1000)
    parser.add_argument("--texts", type=Path, default=Path("sample/ewt/train.conllu"))
    parser.add_argument("--quick", action="store_true", help="the tiny shape, 8 requests a level, no memory run")
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    args.shapes = args.shapes.split(",")
    args.levels = [int(x) for x in args.levels.split(",")]
    if args.quick:
        args.shapes, args.requests = ["tiny"], min(args.requests, 8)
        args.overload_requests, args.overload_timeout = min(args.overload_requests, 40), min(args.overload_timeout, 1.0)
        args.thread_rounds, args.rss_requests = 0, 0
    return args


if __name__ == "__main__":
    main()
