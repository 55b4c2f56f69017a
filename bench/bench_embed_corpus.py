"""embed-corpus with one Ray actor against two, on this machine.

    python -m bench.bench_embed_corpus --sentences 300 --repeats 3 \
        --json results/bench/CPU/embed-corpus.json --markdown results/bench/CPU/embed-corpus.md

One local Ray (as many CPUs as the machine has) is started once, so its start-up is not timed; each
run is a whole ``embed_corpus`` call into a fresh folder: actors started, the pipeline loaded in
each, every shard embedded and written. Runs alternate between the actor counts, repeat by repeat.
The model is the shipped English biLM as a pipeline; each actor has one CPU and one torch thread.
"steady" is the rate between the first shard written and the last (after the actors are up).
"""
import argparse
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

from spacy_elmo.files import write_atomic
from spacy_elmo.embed.corpus import embed_corpus
from spacy_elmo.io.loading import resolve_bilm, shipped_model_dir
from spacy_elmo.pipeline import create_pipeline
from spacy_elmo.records.provenance import data_record, mark_start, model_record, provenance

from .workloads import add_data_options, bench_command, benchmark_sentences, data_file, resolve_data_options


def main(argv: Optional[List[str]] = None) -> Dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sentences", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--actors", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--shard-rows", type=int, default=25)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--markdown", type=Path)
    add_data_options(parser, test=True)
    args = resolve_data_options(parser.parse_args(argv))
    mark_start(bench_command("bench.bench_embed_corpus", argv))
    import ray

    sentences, source = benchmark_sentences(args.sentences, args.test_data, min_len=10, max_len=30)
    tokens = sum(len(s) for s in sentences)
    runs: Dict[int, List[float]] = {n: [] for n in args.actors}
    steady: Dict[int, List[float]] = {n: [] for n in args.actors}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        corpus = work / "corpus.txt"
        corpus.write_text("\n".join(" ".join(s) for s in sentences) + "\n", encoding="utf-8")
        pipeline = work / "pipeline"
        create_pipeline(resolve_bilm(shipped_model_dir())).to_disk(pipeline)
        ray.init(include_dashboard=False, log_to_driver=False, object_store_memory=200_000_000)
        try:
            for repeat in range(args.repeats):
                order = args.actors if repeat % 2 == 0 else list(reversed(args.actors))
                for n in order:
                    out = work / f"out-{n}"
                    shutil.rmtree(out, ignore_errors=True)
                    marks: List[tuple] = []
                    start = time.perf_counter()
                    report = embed_corpus(
                        corpus, out, pipeline, actors=n, shard_rows=args.shard_rows,
                        progress=lambda shards, written, rows, done_tokens, seconds: marks.append((seconds, done_tokens)),
                    )
                    runs[n].append(time.perf_counter() - start)
                    assert report.rows == len(sentences)
                    steady[n].append((marks[-1][1] - marks[0][1]) / (marks[-1][0] - marks[0][0]))
                    print(f"repeat {repeat}: {n} actor(s) {runs[n][-1]:.2f} s, steady {steady[n][-1]:.0f} tokens/s", flush=True)
        finally:
            ray.shutdown()
    info = provenance(model=model_record(shipped_model_dir()), data=data_record([data_file(args.test_data, "test")]))
    result = {
        "provenance": info,
        "sentences": len(sentences),
        "tokens": tokens,
        "source": source,
        "model": "spacy_elmo/models/en_small (shipped)",
        "shard_rows": args.shard_rows,
        "results": {
            str(n): {
                "seconds": times,
                "median_s": statistics.median(times),
                "tokens_per_s": tokens / statistics.median(times),
                "speedup_vs_first": statistics.median(runs[args.actors[0]]) / statistics.median(times),
                "steady_tokens_per_s": steady[n],
                "steady_median_tokens_per_s": statistics.median(steady[n]),
                "steady_speedup_vs_first": statistics.median(steady[n]) / statistics.median(steady[args.actors[0]]),
            }
            for n, times in runs.items()
        },
    }
    if args.json:
        write_atomic(args.json, (json.dumps(result, indent=2) + "\n").encode("utf-8"))
    if args.markdown:
        write_atomic(args.markdown, markdown(result).encode("utf-8"))
    return result


def markdown(result: Dict[str, Any]) -> str:
    info = result["provenance"]
    lines = [
        f"Command: `{info['command']}`",
        "",
        f"Recorded {info['date']} at commit {info['commit']}{' (dirty)' if info['dirty'] else ''}, on {info['cpu']} "
        f"({info['cpu_count']} CPUs; torch {info['torch']}).",
        "",
        f"Corpus: {result['sentences']} sentences, {result['tokens']} tokens ({result['source']}); model: "
        f"{result['model']}; shards of {result['shard_rows']} rows. Each run is a whole `embed_corpus` call "
        "on a Ray started once beforehand: actors started, the pipeline loaded in each, every shard written.",
        "",
        "| actors | median s (whole call) | tokens/s (whole call) | speedup | steady tokens/s (median) | steady speedup | runs (s) |",
        "|---:|---:|---:|---:|---:|---:|---|",
    ]
    for n, r in result["results"].items():
        lines.append(
            f"| {n} | {r['median_s']:.2f} | {r['tokens_per_s']:.0f} | {r['speedup_vs_first']:.2f} | "
            f"{r['steady_median_tokens_per_s']:.0f} | {r['steady_speedup_vs_first']:.2f} | "
            + ", ".join(f"{s:.2f}" for s in r["seconds"]) + " |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
