"""``nlp.pipe`` with the elmo component against the raw biLM on the same sentences.

    python -m bench.bench_pipeline --shape small --threads 2 --json results/bench/CPU/pipeline.json
    python -m bench.bench_pipeline --quick

Docs are made from pre-tokenized sentences beforehand (tokenization is not timed). Two
components hold the same weights: one with ``optimize = false`` (the biLM as loaded), one
with the architecture's default inference settings (``optimize = true``, fp32, char cache). For
each, modes: the raw forward pass of its biLM over all sentences in one batch; ``BiLM.embed``
with the component's batching (char ids, batches, numpy per sentence); ``nlp.pipe`` in this
process; and ``nlp.pipe(n_process=N)`` with --threads // N torch threads per process, process
start-up included. In-process modes run interleaved, best of --repeats after a warm-up (so the char
cache has seen every token).
The model's frozen-output cache, where the architecture has one, is off: it would skip the biLM.
"""
import argparse
import copy
import inspect
import json
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

import torch
from spacy.tokens import Doc
from spacy.util import registry

from spacy_elmo.pipeline import ARCHITECTURE, create_pipeline
from spacy_elmo.records.provenance import data_record, mark_start, provenance

from .workloads import (
    PUBLISHED_NAMES,
    add_data_options,
    bench_command,
    benchmark_sentences,
    char_batch,
    data_file,
    published_bilm,
    resolve_data_options,
    shapes_model,
)

# settings of the model block (spacy-elmo.BiLM.v2 holds the inference settings)
VARIANTS = {
    "optimize = false (as loaded)": {"optimize": False, "char_cache_size": 0},
    "optimize = true (defaults)": {},
}


def main(argv: Optional[List[str]] = None) -> Dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shape", default="small", choices=sorted(PUBLISHED_NAMES))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--n-process", type=int, default=2)
    parser.add_argument("--sentences", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=None, help="the component's batch_size (default: its own)")
    parser.add_argument("--max-batch-items", type=int, default=None, help="its max_batch_items (default: its own)")
    parser.add_argument("--json", default=None)
    parser.add_argument("--quick", action="store_true")
    add_data_options(parser, test=True)
    args = resolve_data_options(parser.parse_args(argv))
    command = bench_command("bench.bench_pipeline", argv)
    mark_start(command)
    if args.quick:
        args.shape, args.sentences, args.repeats = "tiny", 16, 1
    torch.set_num_threads(args.threads)
    sentences, source = benchmark_sentences(args.sentences, args.test_data)
    tokens = sum(map(len, sentences))
    report: Dict = {
        "command": command,
        "provenance": provenance(**shapes_model([args.shape]), data=data_record([data_file(args.test_data, "test")])),
        "shape": PUBLISHED_NAMES[args.shape],
        "threads": args.threads,
        "sentences": {"source": source, "count": len(sentences), "tokens": tokens},
        "results": {},
        "settings": {},
    }
    with tempfile.TemporaryDirectory() as tmp:
        loaded = published_bilm(args.shape, Path(tmp))
    for variant, settings in VARIANTS.items():
        nlp = create_pipeline(copy.deepcopy(loaded), config={"model": {**settings, **model_settings(args)}})
        elmo = nlp.get_pipe("elmo")
        report["settings"][variant] = {
            key: value for key, value in nlp.config["components"]["elmo"].items() if key not in ("model", "mix_weights", "factory")
        }
        model_config = nlp.config["components"]["elmo"]["model"]
        report["settings"][variant]["model"] = {
            key: model_config[key] for key in ("batch_size", "max_batch_items", "frozen_cache_mb") if key in model_config
        }
        report["settings"][variant].update(
            {key: getattr(elmo, key) for key in ("optimize", "precision", "char_cache_size")}
        )
        results = bench_component(nlp, sentences, args)
        report["results"][variant] = {
            name: {"seconds": t, "tokens_per_s": tokens / t, "vs_raw_forward": results["raw forward, one batch"] / t}
            for name, t in results.items()
        }
        cache = elmo.bilm.runner.char_cache
        report["settings"][variant]["char_cache"] = cache.stats() if cache is not None else None
    print(markdown(report))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(report, indent=2), encoding="utf-8")
    return report


def model_settings(args: argparse.Namespace) -> Dict[str, Any]:
    """The ``[components.elmo.model]`` settings that differ from the architecture's defaults."""
    settings: Dict[str, Any] = {}
    if args.batch_size is not None:
        settings["batch_size"] = args.batch_size
    if args.max_batch_items is not None:
        settings["max_batch_items"] = args.max_batch_items
    if "frozen_cache_mb" in inspect.signature(registry.architectures.get(ARCHITECTURE)).parameters:
        settings["frozen_cache_mb"] = 0
    return settings


def bench_component(nlp, sentences: List[List[str]], args: argparse.Namespace) -> Dict[str, float]:
    """Seconds of each mode, best of ``args.repeats``."""
    elmo = nlp.get_pipe("elmo")
    model = elmo.model
    batch_size, max_items = model.attrs["batch_size"], model.attrs["max_batch_items"]
    docs = [Doc(nlp.vocab, words=s) for s in sentences]
    list(nlp.pipe(docs[:2]))  # the component applies its inference settings to the biLM
    bilm = elmo.bilm
    ids, lengths = char_batch(sentences, bilm.config.max_characters_per_token)

    def forward() -> None:
        with torch.no_grad():
            bilm.eval()(ids, lengths)

    modes: Dict[str, Callable[[], object]] = {
        "raw forward, one batch": forward,
        f"BiLM.embed (batch_size={batch_size}, max_batch_items={max_items})": lambda: bilm.embed(
            sentences, batch_size=batch_size, max_batch_items=max_items
        ),
        "nlp.pipe": lambda: list(nlp.pipe(docs, batch_size=len(docs))),
    }
    # interleaved, so that a slow spell of the machine hits every mode alike
    times = {name: float("inf") for name in modes}
    for fn in modes.values():
        fn()
    for _ in range(args.repeats):
        for name, fn in modes.items():
            start = time.perf_counter()
            fn()
            times[name] = min(times[name], time.perf_counter() - start)
    name = f"nlp.pipe(n_process={args.n_process}), {max(1, args.threads // args.n_process)} thread(s) each"
    times[name] = multiprocess_time(nlp, docs, args.n_process, args.threads)
    return times


def multiprocess_time(nlp, docs: List[Doc], n_process: int, threads: int) -> float:
    # Workers are forked from this process; the component runs each on one torch thread (GNU
    # OpenMP does not survive a fork), and this process steps aside while they work.
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
    ]
    for variant, settings in report["settings"].items():
        lines.append(f"- {variant}: `{json.dumps(settings)}`")
    lines += ["", "| component | mode | tokens/s | vs raw forward |", "|---|---|---:|---:|"]
    for variant, results in report["results"].items():
        for name, r in results.items():
            lines.append(f"| {variant} | {name} | {r['tokens_per_s']:.1f} | {r['vs_raw_forward']:.2f} |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
