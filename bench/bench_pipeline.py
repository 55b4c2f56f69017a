"""``nlp.pipe`` with the elmo component against the raw biLM on the same sentences.

    python -m bench.bench_pipeline --shape small --threads 2 --json bench/results/pipeline.json
    python -m bench.bench_pipeline --quick

Docs are made from pre-tokenized sentences beforehand (tokenization is not timed). Modes:
the raw forward pass over all sentences in one batch; ``BiLM.embed`` with the component's
batching (char ids, batches, numpy per sentence); ``nlp.pipe`` in this process; and
``nlp.pipe(n_process=N)`` with --threads // N torch threads per process, process start-up
included. Each mode runs with the biLM as loaded and after ``optimize_for_inference``.
"""
import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional

import torch
from spacy.tokens import Doc

from spacy_elmo.bilm.fast import optimize_for_inference
from spacy_elmo.pipeline import create_pipeline

from .hardware import best_time
from .workloads import PUBLISHED_NAMES, benchmark_sentences, char_batch, frequent_tokens, published_bilm


def main(argv: Optional[List[str]] = None) -> Dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shape", default="small", choices=sorted(PUBLISHED_NAMES))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--n-process", type=int, default=2)
    parser.add_argument("--sentences", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--cache-size", type=int, default=20000)
    parser.add_argument("--json", default=None)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    if args.quick:
        args.shape, args.sentences, args.repeats, args.cache_size = "tiny", 16, 1, 200
    torch.set_num_threads(args.threads)
    sentences, source = benchmark_sentences(args.sentences)
    tokens = sum(map(len, sentences))
    report: Dict = {
        "command": "python -m bench.bench_pipeline " + " ".join(argv if argv is not None else sys.argv[1:]),
        "shape": PUBLISHED_NAMES[args.shape],
        "threads": args.threads,
        "sentences": {"source": source, "count": len(sentences), "tokens": tokens},
        "settings": {},
    }
    with tempfile.TemporaryDirectory() as tmp:
        bilm = published_bilm(args.shape, Path(tmp))
    nlp = create_pipeline(bilm)
    settings = nlp.config["components"]["elmo"]["model"]
    batch_size, max_items = settings["batch_size"], settings["max_batch_items"]
    docs = [Doc(nlp.vocab, words=s) for s in sentences]
    ids, lengths = char_batch(sentences, bilm.config.max_characters_per_token)

    def forward() -> None:
        with torch.no_grad():
            bilm(ids, lengths)

    modes: Dict[str, Callable[[], object]] = {
        "raw forward, one batch": forward,
        f"BiLM.embed (batch_size={batch_size}, max_batch_items={max_items})": lambda: bilm.embed(
            sentences, batch_size=batch_size, max_batch_items=max_items
        ),
        "nlp.pipe": lambda: list(nlp.pipe(docs, batch_size=len(docs))),
    }
    report["results"] = {}
    for variant in ("as loaded", "optimize_for_inference fp32 + char cache"):
        if variant != "as loaded":
            vocab = frequent_tokens(args.cache_size) if not args.quick else None
            optimize_for_inference(bilm, char_cache_size=args.cache_size, vocab=vocab)
        times = {name: best_time(fn, args.repeats) for name, fn in modes.items()}
        times[f"nlp.pipe(n_process={args.n_process}), {max(1, args.threads // args.n_process)} thread(s) each"] = (
            multiprocess_time(nlp, docs, args.n_process, args.threads)
        )
        reference = times["raw forward, one batch"]
        report["results"][variant] = {
            name: {"seconds": t, "tokens_per_s": tokens / t, "vs_raw_forward": reference / t}
            for name, t in times.items()
        }
    print(markdown(report))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(__import__("json").dumps(report, indent=2), encoding="utf-8")
    return report




def multiprocess_time(nlp, docs: List[Doc], n_process: int, threads: int) -> float:
    # Workers are forked from this process and inherit its torch thread setting.
    torch.set_num_threads(max(1, threads // n_process))
    try:
        start = time.perf_counter()
        out = list(nlp.pipe(docs, batch_size=max(1, len(docs) // (2 * n_process)), n_process=n_process))
        elapsed = time.perf_counter() - start
    finally:
        torch.set_num_threads(threads)
    if len(out) != len(docs) or any(doc._.elmo is None for doc in out):
        raise RuntimeError("nlp.pipe with several processes lost documents or annotations")
    return elapsed


def markdown(report: Dict) -> str:
    lines = [
        f"Command: `{report['command']}`",
        "",
        f"{report['shape']}, {report['sentences']['count']} sentences ({report['sentences']['tokens']} tokens, "
        f"{report['sentences']['source']}), {report['threads']} threads.",
        "",
        "| biLM | mode | tokens/s | vs raw forward |",
        "|---|---|---:|---:|",
    ]
    for variant, results in report["results"].items():
        for name, r in results.items():
            lines.append(f"| {variant} | {name} | {r['tokens_per_s']:.1f} | {r['vs_raw_forward']:.2f} |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
