"""Load test of the served pipeline (``spacy_elmo.export.serve``) on 127.0.0.1: throughput and latency
at 1, 8 and 32 concurrent clients, every response checked against the offline result.

    python -m lab.serve.load_test --levels 1,8,32 --requests 200 --time-limit 120 \
        --texts sample/ewt/train.conllu --json results/export/serve-load.json
    python -m lab.serve.load_test --quick     # seconds: the suite's version

The served pipeline and the offline one are two instances of ``spacy.blank("en")`` + the ``elmo``
component (the shipped biLM), so no response can come from the offline one's layer cache. Each
request sends a text not sent before in the run (the CoNLL-U file's ``# text`` lines, in order),
so the server's own cache of layers per segment never answers either. At each level, ``clients``
clients send requests one after another until ``requests`` are sent or ``time_limit`` seconds
have passed; the run stops by itself. A response "equals" the offline result when its tokens are
the same and every value of its layers and mixed vector is within ``--tolerance`` (1e-5) of
``nlp(text)`` alone (batched with other texts, float32 sums may round differently); how many are
bitwise equal is recorded too. Then malformed and oversized requests are sent, each must get a
4xx with an error message, and a well-formed one after them must still be answered.
"""
import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

import numpy as np

from spacy_elmo.export.serve import LocalServer, doc_payload, make_app
from spacy_elmo.records.provenance import data_record, mark_start, model_record, provenance


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
        got, want = np.asarray(payload[key], dtype=np.float32), np.asarray(expected[key], dtype=np.float32)
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
            response = await session.post("/embed", json={"text": text})
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


def load_test(served: Any, offline: Any, texts: List[str], *, levels: List[int], requests: int,
              time_limit: float, tolerance: float = 1e-5, max_chars: int = 2000, max_batch: int = 32,
              wait_ms: float = 5.0) -> Dict[str, Any]:
    """Serve ``served`` on 127.0.0.1, run every level, then the bad requests; check against ``offline``.

    texts (List[str]): distinct texts, at least ``requests * len(levels) + 1``; level k sends its own.
    RETURNS (Dict[str, Any]): the offline time, each level's numbers, the bad requests' answers.
    """
    needed = requests * len(levels) + 1
    if len(texts) < needed:
        raise SystemExit(f"{len(texts)} distinct texts, the run needs {needed}: ask for fewer requests")
    started = time.time()
    run_texts = texts[:needed]
    expected = {t: doc_payload(doc) for t, doc in zip(run_texts, (offline(t) for t in run_texts))}
    report: Dict[str, Any] = {"server": {"max_batch": max_batch, "wait_ms": wait_ms, "max_chars": max_chars},
                              "tolerance": tolerance, "offline_seconds": time.time() - started, "levels": []}
    app = make_app(served, max_chars=max_chars, max_batch=max_batch, wait_ms=wait_ms)
    with LocalServer(app) as url:
        for k, clients in enumerate(levels):
            chunk = run_texts[k * requests: (k + 1) * requests]
            app.state.batcher.batches.clear()
            level = asyncio.run(run_level(url, chunk, expected, clients, time_limit, tolerance))
            batches = app.state.batcher.batches or [0]
            level["batch_sizes"] = {"mean": statistics.fmean(batches), "max": max(batches)}
            report["levels"].append(level)
        report["bad_requests"] = bad_requests(url, max_chars)
    return report


def main(argv: Optional[List[str]] = None) -> Dict[str, Any]:
    args = parse_args(argv)
    command = "python -m lab.serve.load_test " + " ".join(argv if argv is not None else sys.argv[1:])
    mark_start(command)
    load_before = os.getloadavg()
    report: Dict[str, Any] = {"command": command, "note": args.load, "torch_threads": args.threads}
    report.update(load_test(
        elmo_pipeline(args.threads), elmo_pipeline(args.threads), conllu_texts(args.texts),
        levels=[int(x) for x in args.levels.split(",")], requests=args.requests, time_limit=args.time_limit,
        tolerance=args.tolerance, max_chars=args.max_chars, max_batch=args.max_batch, wait_ms=args.wait_ms))
    report["load_average"] = {"before": load_before, "after": os.getloadavg()}
    report["provenance"] = provenance(command, model=[model_record()], data=data_record([args.texts]))
    for level in report["levels"]:
        print(f"{level['clients']:3d} clients: {level['requests']} requests, {level['requests_per_s']:.1f} req/s, "
              f"{level['tokens_per_s']:.0f} tokens/s, p50 {level['latency_ms']['p50']:.0f} ms, "
              f"p99 {level['latency_ms']['p99']:.0f} ms, differing from offline: "
              f"{level['responses_differing_from_offline']}, bitwise equal: {level['responses_bitwise_equal']}, "
              f"max abs diff {level['max_abs_diff_to_offline']:.2e}")
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
    parser.add_argument("--tolerance", type=float, default=1e-5)
    parser.add_argument("--quick", action="store_true", help="levels 1,8,32 with 8 requests each: seconds")
    parser.add_argument("--load", default="a 2-core machine shared with other jobs (load average recorded)")
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    if args.quick:
        args.requests, args.time_limit = min(args.requests, 8), min(args.time_limit, 30.0)
    return args


if __name__ == "__main__":
    main()
