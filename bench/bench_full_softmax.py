"""Scoring text with the published `original` shape and its full 793,471-word softmax: tokens/s and
peak memory of the chunked softmax, against the whole (tokens x words) matrix in the same run.

    nice python -m bench.bench_full_softmax --json results/bench/CPU/full-softmax.json

A 2x4096 LSTM biLM with a 512 projection (``bilm.config.ORIGINAL``) and a softmax of 793,471 rows,
all weights random (uniform with std 0.035, which keeps float32 stable; uniform draws
are quicker than normal ones for 500M values), score the same sentences of
random vocabulary words with ``evaluate_perplexity`` (fresh state, both directions, batches of at
most ``--batch-tokens`` positions) under each setting: the softmax normalized over chunks of 8,192
rows (the default) and of 65,536 rows, and the baseline, the whole logits matrix at once
(cross-entropy over (tokens x 793,471) floats: what evaluation did before chunking). Each run is a
fresh process, so that its peak RSS (``ru_maxrss``) is its own; the settings are interleaved,
``--repeats`` rounds, and the spread is each setting's range over the rounds. The machine's load
average is recorded before and after: on a shared machine the speeds move with it.
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional

import numpy as np
import torch

from spacy_elmo.files import write_atomic
from spacy_elmo.records.provenance import mark_start, portable_args, provenance

N_WORDS = 793_471
STD = 0.035
# chunk sizes compared; 0 is the baseline: the whole matrix at once
SETTINGS = {"chunks of 8,192": 8192, "chunks of 65,536": 65536, "whole matrix": 0}


def worker(args: argparse.Namespace) -> Dict:
    """One run in this process. RETURNS (Dict): tokens, seconds, tokens/s, RSS after building, peak RSS."""
    from spacy_elmo.bilm import BiLM
    from spacy_elmo.bilm.config import ORIGINAL, SMALL
    from spacy_elmo.bilm.softmax import WordSoftmax
    from spacy_elmo.training.lm import LanguageModel
    from spacy_elmo.training.perplexity import evaluate_perplexity
    from spacy_elmo.training.vocab import Vocab

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    config = {"original": ORIGINAL, "small": SMALL}[args.shape]
    n_words, chunk_size = args.vocab, args.worker
    bilm = BiLM(config)
    softmax = WordSoftmax.from_weights(torch.empty(n_words, config.projection_dim), torch.empty(n_words),
                                       chunk_size=chunk_size or n_words)
    with torch.no_grad():
        for param in [*bilm.parameters(), *softmax.parameters()]:
            param.uniform_(-STD * 3**0.5, STD * 3**0.5)
    vocab = Vocab([f"w{i}" for i in range(n_words - 3)])
    rng = np.random.default_rng(0)
    # Zipf-like word ids, as text has them (the ids only pick targets: the cost is the same for any)
    text = [[vocab.tokens[min(int(rng.zipf(1.3)) + 2, n_words - 1)] for _ in range(args.words)]
            for _ in range(args.sentences)]
    lm = LanguageModel(bilm, softmax).eval()
    built = _rss_mb()
    evaluate_perplexity(lm, text[:1], vocab, max_batch_tokens=args.batch_tokens)  # first call: allocator, kernels
    start = time.perf_counter()
    result = evaluate_perplexity(lm, text, vocab, max_batch_tokens=args.batch_tokens)
    seconds = time.perf_counter() - start
    return {"tokens": result.n_forward, "seconds": round(seconds, 3),
            "tokens_per_s": round(result.n_forward / seconds, 2), "rss_built_mb": round(built, 1),
            "peak_rss_mb": round(_rss_mb(), 1), "ppl": round(result.mean, 1)}


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: kilobytes


def run_setting(args: argparse.Namespace, chunk_size: int) -> Dict:
    command = [sys.executable, "-m", "bench.bench_full_softmax", "--worker", str(chunk_size),
               "--sentences", str(args.sentences), "--words", str(args.words), "--batch-tokens", str(args.batch_tokens),
               "--threads", str(args.threads), "--shape", args.shape, "--vocab", str(args.vocab)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"the run with chunk size {chunk_size} failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def summary(runs: List[Dict]) -> Dict[str, Dict]:
    """Per setting: median tokens/s with its range over the rounds, peak RSS, and the ratio to the baseline."""
    result = {}
    for name in SETTINGS:
        mine = [r for r in runs if r["setting"] == name]
        speeds = [r["tokens_per_s"] for r in mine]
        result[name] = {"tokens_per_s_median": round(statistics.median(speeds), 2),
                        "tokens_per_s_range": [min(speeds), max(speeds)],
                        "peak_rss_mb_max": max(r["peak_rss_mb"] for r in mine),
                        "rss_grown_mb_max": round(max(r["peak_rss_mb"] - r["rss_built_mb"] for r in mine), 1)}
    base = result["whole matrix"]["tokens_per_s_median"]
    for name in SETTINGS:
        result[name]["x_whole_matrix_speed"] = round(result[name]["tokens_per_s_median"] / base, 3)
    return result


def table(record: Dict) -> str:
    prov = record["provenance"]
    lines = [f"# Full softmax of the `{record['shape']}` shape ({record['words']:,} words): {prov['cpu']}", "",
             f"`{prov['command']}`", "",
             f"{record['tokens']} tokens a run (fresh state, batches of at most {record['batch_tokens']} positions), "
             f"{record['threads']} torch thread(s), {record['repeats']} interleaved rounds; load average "
             f"{record['loadavg_before'][0]:.1f} before, {record['loadavg_after'][0]:.1f} after "
             f"({prov['cpu_count']} CPUs)" + (
                 ": a shared machine, busier than its CPUs, so the speeds are indicative and their ranges wide."
                 if max(record["loadavg_before"][0], record["loadavg_after"][0]) > prov["cpu_count"] else "."), "",
             "| setting | tokens/s (median) | range | x whole matrix | peak RSS (MB) | grown while scoring (MB) |",
             "|---|---:|---|---:|---:|---:|"]
    lines += [
        f"| {name} | {row['tokens_per_s_median']:.1f} | {row['tokens_per_s_range'][0]:.1f}-{row['tokens_per_s_range'][1]:.1f}"
        f" | {row['x_whole_matrix_speed']:.2f} | {row['peak_rss_mb_max']:,.0f} | {row['rss_grown_mb_max']:,.0f} |"
        for name, row in record["summary"].items()
    ]
    return "\n".join(lines) + "\n"


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sentences", type=int, default=6)
    parser.add_argument("--words", type=int, default=10, help="words a sentence")
    parser.add_argument("--batch-tokens", type=int, default=256, help="most positions a batch (the whole matrix's rows)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--shape", choices=["original", "small"], default="original", help="the biLM's shape")
    parser.add_argument("--vocab", type=int, default=N_WORDS, help="softmax rows (the published 793,471)")
    parser.add_argument("--repeats", type=int, default=2, help="interleaved rounds")
    parser.add_argument("--json", type=Path, help="the record (a .md table is written beside it)")
    parser.add_argument("--worker", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker is not None:
        print(json.dumps(worker(args)))
        return 0
    if args.json is None:
        parser.error("--json is required")
    command = "python -m bench.bench_full_softmax " + " ".join(portable_args(sys.argv[1:] if argv is None else argv))
    mark_start(command)
    loadavg_before = os.getloadavg()
    runs = []
    for round_index in range(args.repeats):
        order = list(SETTINGS) if round_index % 2 == 0 else list(SETTINGS)[::-1]
        for name in order:
            runs.append({"round": round_index, "setting": name, "chunk_size": SETTINGS[name],
                         **run_setting(args, SETTINGS[name])})
            print(json.dumps(runs[-1]), flush=True)
    record = {
        "shape": args.shape, "words": args.vocab, "std": STD, "tokens": runs[0]["tokens"], "batch_tokens": args.batch_tokens,
        "threads": args.threads, "repeats": args.repeats, "runs": runs, "summary": summary(runs),
        "loadavg_before": [round(x, 2) for x in loadavg_before],
        "loadavg_after": [round(x, 2) for x in os.getloadavg()],
        "provenance": provenance(command, model=None, data={},
                                 model_note=f"random weights in the shape of `{args.shape}` (bilm.config) "
                                 f"with a random {args.vocab:,}-word softmax",
                                 data_note="random sentences of the vocabulary's words, drawn in the process"),
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    for path, text in ((args.json, json.dumps(record, indent=2) + "\n"), (args.json.with_suffix(".md"), table(record))):
        write_atomic(path, text.encode("utf-8"))
    print(json.dumps(record["summary"], indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
