"""Load test of the served pipeline (``spacy_elmo.export.serve``) on 127.0.0.1: throughput and latency
at 1, 8 and 32 concurrent clients, every response checked against the offline result.

    python -m lab.serve.load_test --levels 1,8,32 --requests 200 --time-limit 120 \
        --texts sample/ewt/train.conllu --json results/export/serve-load.json
    python -m lab.serve.load_test --quick     # seconds: the suite's version

The server runs ``python -m spacy_elmo serve`` in a process of its own (``--server thread``: in a
thread of this process, as the suite's short test does), and the offline pipeline is another
instance of ``spacy.blank("en")`` + the ``elmo`` component (the shipped biLM), so no response can
come from the offline one's layer cache. Each request sends a text not sent before in the run (the
CoNLL-U file's ``# text`` lines, in order), so the server's own cache of layers per segment never
answers either. At each level, ``clients`` clients send requests one after another until
``requests`` are sent or ``time_limit`` seconds have passed; the run stops by itself. A response
equals the offline result when its tokens are the same and every value of its layers and mixed
vector is within ``TOLERANCE`` of ``nlp(text)`` alone; how many are bitwise equal is recorded, and so
is how far the offline pipeline's own batched results (``nlp.pipe``, 32 at a time) lie from its
results alone: batching changes float32 rounding by itself, server or not. Then malformed and
oversized requests are sent, each must get a 4xx with an error message, and a well-formed one after
them must still be answered.
"""
import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np

from spacy_elmo.export.serve import LocalServer, doc_payload, make_app
from spacy_elmo.export.serve_body import decode_array
from spacy_elmo.records.provenance import data_record, mark_start, model_record, provenance

# A response equals the offline result when its tokens are the same and every value is within this
# of nlp(text) alone: texts batched together round their float32 sums differently from a text alone
# (the offline pipeline's own batched-vs-alone difference is recorded beside the responses').
TOLERANCE = 1e-4


def conllu_texts(path: Path) -> List[str]:
    """The distinct ``# text = ...`` lines of a CoNLL-U file, in order."""
    seen: Dict[str, None] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("# text = "):
            seen.setdefault(line[len("# text = "):].strip(), None)
    return [t for t in seen if t]


def elmo_pipeline(threads: int):
    """``spacy.blank("en")`` with the elmo component (the shipped biLM), torch on ``threads`` threads."""
    import spacy
    import torch

    import spacy_elmo  # noqa: F401  (registers the elmo factory)

    torch.set_num_threads(threads)
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo")
    nlp.initialize()
    return nlp


def compare(payload: Dict[str, Any], expected: Dict[str, Any]) -> Dict[str, Any]:
    """How a response differs from the offline result: same tokens?, the largest absolute difference."""
    if payload.get("tokens") != expected["tokens"]:
        return {"same_tokens": False, "max_abs_diff": float("inf"), "bitwise": False}
    worst, bitwise = 0.0, True
    for key in ("mixed", "layers"):
        got = decode_array(payload[key]) if isinstance(payload[key], dict) else np.asarray(payload[key], np.float32)
        want = np.asarray(expected[key], dtype=np.float32)
        if got.shape != want.shape:
            return {"same_tokens": True, "max_abs_diff": float("inf"), "bitwise": False}
        if got.size:
            worst = max(worst, float(np.abs(got - want).max()))
        bitwise = bitwise and bool(np.array_equal(got, want))
    return {"same_tokens": True, "max_abs_diff": worst, "bitwise": bitwise}


async def run_level(url: str, texts: List[str], expected: Dict[str, Dict[str, Any]], clients: int,
                    time_limit: float, tolerance: float) -> Dict[str, Any]:
    """``clients`` clients send ``texts`` (each once) until all are sent or ``time_limit`` has passed."""
    import httpx

    latencies: List[float] = []
    checks: List[Dict[str, Any]] = []
    failures: List[str] = []
    next_index = 0
    started = time.perf_counter()

    async def client(session: "httpx.AsyncClient") -> None:
        nonlocal next_index
        while next_index < len(texts) and time.perf_counter() - started < time_limit:
            text = texts[next_index]
            next_index += 1
            sent = time.perf_counter()
            response = await session.post("/embed", json={"text": text, "layers": True})
            latencies.append(time.perf_counter() - sent)
            if response.status_code != 200:
                failures.append(f"{response.status_code}: {response.text[:200]}")
                continue
            checks.append(compare(response.json(), expected[text]))

    async with httpx.AsyncClient(base_url=url, timeout=max(60.0, time_limit)) as session:
        await asyncio.gather(*(client(session) for _ in range(clients)))
    seconds = time.perf_counter() - started
    sent = texts[: len(latencies)]
    tokens = sum(len(expected[t]["tokens"]) for t in sent)
    differ = [c for c in checks if not (c["same_tokens"] and c["max_abs_diff"] <= tolerance)]
    ms = sorted(1000 * x for x in latencies)
    return {
        "clients": clients,
        "requests": len(latencies),
        "seconds": seconds,
        "requests_per_s": len(latencies) / seconds,
        "tokens_per_s": tokens / seconds,
        "latency_ms": {"p50": float(np.percentile(ms, 50)), "p99": float(np.percentile(ms, 99)),
                       "mean": statistics.fmean(ms), "max": ms[-1]},
        "failed": failures,
        "responses_differing_from_offline": len(differ),
        "responses_bitwise_equal": sum(c["bitwise"] for c in checks),
        "max_abs_diff_to_offline": max((c["max_abs_diff"] for c in checks), default=0.0),
    }


def bad_requests(url: str, max_chars: int) -> List[Dict[str, Any]]:
    """Malformed and oversized requests, then a good one: each answer's status and message."""
    import httpx

    cases = {
        "not JSON": {"content": b"{text: nope", "headers": {"content-type": "application/json"}},
        "no text field": {"json": {"txt": "hello"}},
        "text not a string": {"json": {"text": 42}},
        "oversized text": {"json": {"text": "word " * (max_chars // 5 + 1)}},
        "well-formed after them": {"json": {"text": "Still serving ."}},
    }
    answers = []
    with httpx.Client(base_url=url, timeout=60) as session:
        for name, request in cases.items():
            response = session.post("/embed", **request)
            body = response.json()
            answers.append({"request": name, "status": response.status_code,
                            "error": body.get("error") if isinstance(body, dict) else None})
    return answers


def offline_results(pipeline: Callable[[], Any], texts: List[str]) -> Tuple[Dict[str, Dict[str, Any]], Dict[str, Any]]:
    """Each text's payload from ``nlp(text)`` alone, and how far the same texts batched through
    ``nlp.pipe`` (32 at a time) of another instance differ from that (each instance caches the layers of
    the texts it has seen): the float32 rounding batching brings by itself."""
    offline = pipeline()
    started = time.time()
    expected = {t: doc_payload(offline(t)) for t in texts}
    seconds = time.time() - started
    del offline
    docs = pipeline().pipe(texts, batch_size=32)
    batched = [compare(doc_payload(doc), expected[t]) for t, doc in zip(texts, docs)]
    return expected, {"seconds_alone": seconds, "batched_vs_alone_max_abs_diff": max(c["max_abs_diff"] for c in batched),
                      "batched_bitwise_equal_to_alone": sum(c["bitwise"] for c in batched), "texts": len(texts)}


def run_levels(url: str, texts: List[str], expected: Dict[str, Dict[str, Any]], *, levels: List[int], requests: int,
               time_limit: float, tolerance: float, max_chars: int) -> Dict[str, Any]:
    """Every level against the server at ``url``, each with its own texts, then the bad requests."""
    import httpx

    report: Dict[str, Any] = {"levels": []}
    for k, clients in enumerate(levels):
        chunk = texts[k * requests: (k + 1) * requests]
        before = httpx.get(f"{url}/health").json()
        level = asyncio.run(run_level(url, chunk, expected, clients, time_limit, tolerance))
        after = httpx.get(f"{url}/health").json()
        batches = after["batches"] - before["batches"]
        level["batches"] = {"count": batches, "mean_size": (after["texts"] - before["texts"]) / max(batches, 1)}
        report["levels"].append(level)
    report["bad_requests"] = bad_requests(url, max_chars)
    return report


def load_test(pipeline: Callable[[], Any], texts: List[str], *, levels: List[int], requests: int,
              time_limit: float, tolerance: float = TOLERANCE, max_chars: int = 2000, max_batch: int = 32,
              wait_ms: float = 5.0) -> Dict[str, Any]:
    """Serve ``pipeline()`` on 127.0.0.1 in this process, run every level, then the bad requests; the
    offline results come from other instances of ``pipeline()``.

    texts (List[str]): distinct texts, at least ``requests * len(levels) + 1``; level k sends its own.
    RETURNS (Dict[str, Any]): the offline results' numbers, each level's numbers, the bad requests' answers.
    """
    run_texts = needed_texts(texts, requests * len(levels) + 1)
    expected, offline_record = offline_results(pipeline, run_texts)
    report: Dict[str, Any] = {"server": {"where": "a thread of this process", "max_batch": max_batch,
                                         "wait_ms": wait_ms, "max_chars": max_chars},
                              "tolerance": tolerance, "offline": offline_record}
    with LocalServer(make_app(pipeline(), max_chars=max_chars, max_batch=max_batch, wait_ms=wait_ms)) as url:
        report.update(run_levels(url, run_texts, expected, levels=levels, requests=requests, time_limit=time_limit,
                                 tolerance=tolerance, max_chars=max_chars))
    return report


def needed_texts(texts: List[str], needed: int) -> List[str]:
    if len(texts) < needed:
        raise SystemExit(f"{len(texts)} distinct texts, the run needs {needed}: ask for fewer requests")
    return texts[:needed]


@contextmanager
def server_process(args: argparse.Namespace) -> Iterator[str]:
    """``python -m spacy_elmo serve`` with the load test's settings in a process of its own; ended on exit."""
    options = ["--max-chars", str(args.max_chars), "--max-batch", str(args.max_batch), "--wait-ms", str(args.wait_ms),
               "--threads", str(args.threads)]
    with serve_process(options) as (url, _):
        yield url


@contextmanager
def serve_process(options: Sequence[str], *, start_timeout: float = 300.0) -> Iterator[Tuple[str, subprocess.Popen]]:
    """``python -m spacy_elmo serve OPTIONS`` in a process of its own on a free port of 127.0.0.1, once it
    answers /health; ended on exit. RETURNS (url, the process)."""
    import httpx

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [sys.executable, "-m", "spacy_elmo", "serve", "--host", "127.0.0.1", "--port", str(port), *options]
    # its log (a line a request) goes to a file: a pipe nobody reads would fill and stop the server
    log = tempfile.TemporaryFile()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=log)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + start_timeout
        while True:
            if process.poll() is not None:
                log.seek(0)
                raise SystemExit(f"the server exited: {log.read().decode(errors='replace')[-500:]}")
            try:
                httpx.get(f"{url}/health", timeout=2).raise_for_status()
                break
            except httpx.HTTPError:
                if time.monotonic() > deadline:
                    raise SystemExit(f"the server did not answer /health within {start_timeout:.0f} s")
                time.sleep(0.5)
        yield url, process
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()


def main(argv: Optional[List[str]] = None) -> Dict[str, Any]:
    args = parse_args(argv)
    command = "python -m lab.serve.load_test " + " ".join(argv if argv is not None else sys.argv[1:])
    mark_start(command)
    load_before = os.getloadavg()
    levels = [int(x) for x in args.levels.split(",")]
    report: Dict[str, Any] = {"command": command, "note": args.load, "torch_threads": args.threads}
    if args.server == "thread":
        report.update(load_test(
            lambda: elmo_pipeline(args.threads), conllu_texts(args.texts), levels=levels,
            requests=args.requests, time_limit=args.time_limit, tolerance=args.tolerance, max_chars=args.max_chars,
            max_batch=args.max_batch, wait_ms=args.wait_ms))
    else:
        run_texts = needed_texts(conllu_texts(args.texts), args.requests * len(levels) + 1)
        expected, report["offline"] = offline_results(lambda: elmo_pipeline(args.threads), run_texts)
        report["server"] = {"where": "python -m spacy_elmo serve, a process of its own", "max_batch": args.max_batch,
                            "wait_ms": args.wait_ms, "max_chars": args.max_chars}
        report["tolerance"] = args.tolerance
        with server_process(args) as url:
            report.update(run_levels(url, run_texts, expected, levels=levels, requests=args.requests,
                                     time_limit=args.time_limit, tolerance=args.tolerance, max_chars=args.max_chars))
    report["load_average"] = {"before": load_before, "after": os.getloadavg()}
    report["provenance"] = provenance(command, model=[model_record()], data=data_record([args.texts]))
    offline = report["offline"]
    print(f"offline: {offline['texts']} texts alone in {offline['seconds_alone']:.1f} s; batched vs alone: max abs diff "
          f"{offline['batched_vs_alone_max_abs_diff']:.2e}, bitwise equal {offline['batched_bitwise_equal_to_alone']}")
    for level in report["levels"]:
        print(f"{level['clients']:3d} clients: {level['requests']} requests, {level['requests_per_s']:.1f} req/s, "
              f"{level['tokens_per_s']:.0f} tokens/s, p50 {level['latency_ms']['p50']:.0f} ms, "
              f"p99 {level['latency_ms']['p99']:.0f} ms, mean batch {level['batches']['mean_size']:.1f}, "
              f"differing from offline: {level['responses_differing_from_offline']}, "
              f"bitwise equal: {level['responses_bitwise_equal']}, max abs diff {level['max_abs_diff_to_offline']:.2e}")
    for answer in report["bad_requests"]:
        print(f"{answer['request']}: {answer['status']} {answer['error'] or ''}")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return report


def parse_args(argv: Optional[List[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--levels", default="1,8,32", help="concurrent clients, comma-separated")
    parser.add_argument("--requests", type=int, default=200, help="requests per level (each a new text)")
    parser.add_argument("--time-limit", type=float, default=120.0, help="seconds per level at most")
    parser.add_argument("--texts", type=Path, default=Path("sample/ewt/train.conllu"))
    parser.add_argument("--threads", type=int, default=1, help="torch threads of each pipeline")
    parser.add_argument("--max-batch", type=int, default=32)
    parser.add_argument("--wait-ms", type=float, default=5.0)
    parser.add_argument("--max-chars", type=int, default=2000)
    parser.add_argument("--tolerance", type=float, default=TOLERANCE)
    parser.add_argument("--server", choices=("process", "thread"), default="process",
                        help="the server in a process of its own (the clients' JSON work does not share its GIL), "
                             "or in a thread of this one")
    parser.add_argument("--quick", action="store_true", help="levels 1,8,32 with 8 requests each: seconds")
    parser.add_argument("--load", default="a 2-core machine shared with other jobs (load average recorded)")
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    if args.quick:
        args.requests, args.time_limit = min(args.requests, 8), min(args.time_limit, 30.0)
    return args


if __name__ == "__main__":
    main()
