"""spacy-elmo against ELMoForManyLangs' own code on a model of EFML's published shape.

    EFML_VENV/bin/python -m bench.bench_efml --threads 2 --repeats 5 --single 6 \
        --json results/bench/CPU/efml.json --markdown results/bench/CPU/efml.md

Runs where both packages import: the side environment of lab/fixtures/make_efml_fixtures.py (EFML
0.0.4.post2 with overrides==3.1.0) with this checkout on the path (``python -m`` from the
repository root puts it there; spacy-elmo's io and fast paths also need safetensors there).

The model has the architecture of EFML's published models (its packaged
``cnn_50_100_512_4096_sample.json``: 2 layers of 4096 cells projected to 512, the 2048-filter char
CNN with 2 highway layers, a 100-wide word embedding) and EFML's own random initialization, built
by EFML's ``biLM.Model`` with the vocabularies its trainer builds from the training text (EWT's
training set here), and saved by its ``save_model``. Both libraries load that directory: EFML's
``Embedder`` and ``spacy_elmo.io.load_bilm``. On the same sentences (EWT test, 20-30 tokens) they
run interleaved, alternating which goes first, --repeats times: EFML's ``sents2elmo(...,
output_layer=-2)`` against our ``embed`` (all layers), on one batch and one sentence at a time.
EFML's encoder carries its state from call to call, so ``encoder.reset_states()`` runs (untimed)
before every EFML call: each then starts from a zero state, as ours does, and every call's output
is compared with ours.
"""
import argparse
import json
import logging
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence

import numpy as np
import torch

from spacy_elmo.fast import optimize_for_inference
from spacy_elmo.io import load_bilm
from spacy_elmo.records.provenance import data_record, mark_start, model_record, provenance

from lab.records.inference import inference_path

from .workloads import (
    add_data_options,
    bench_command,
    benchmark_sentences,
    conllu_sentences,
    data_file,
    display_path,
    resolve_data_options,
)

PUBLISHED_CONFIG = "cnn_50_100_512_4096_sample.json"


def main(argv: Optional[List[str]] = None) -> Dict:
    args = parse_args(argv)
    from elmoformanylangs.elmo import Embedder
    from lab.fixtures.make_efml_fixtures import build_model, efml_versions

    logging.getLogger("elmoformanylangs").setLevel(logging.WARNING)  # it logs the whole module tree
    torch.set_num_threads(args.threads)
    started = time.time()
    command = bench_command("bench.bench_efml", argv)
    mark_start(command)
    report: Dict = {"command": command, "provenance": {}, "efml": efml_versions()}  # filled in once the model is built
    sentences, source = benchmark_sentences(args.sentences, args.test_data)
    singles = sentences[: args.single]
    report["sentences"] = {"source": source, "count": len(sentences), "tokens": sum(map(len, sentences)),
                           "single": len(singles), "single_tokens": sum(map(len, singles))}  # fmt: skip
    train = data_file(args.train_data, "train")
    corpus = "\n".join(" ".join(s) for s in conllu_sentences(train)) + "\n"
    config = published_architecture()
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = Path(tmp) / "model"
        log("building the model with EFML's classes")
        build_model(model_dir, config, corpus=corpus, seed=args.seed, std=None, legacy=False, work=Path(tmp))
        report["model"] = describe_model(model_dir, config, train)
        # the model lives only in this run's temporary folder: named by how it was made
        built = {**model_record(model_dir), "name": f"ELMoForManyLangs {PUBLISHED_CONFIG} built by EFML's classes "
                 f"(seed {args.seed}, vocabularies of the training text)", "weights": "encoder.pkl"}
        report["provenance"] = provenance(model=built, data=data_record([data_file(args.test_data, "test"), train]))
        log("loading it with EFML and with spacy-elmo")
        efml = Embedder(str(model_dir), batch_size=64)
        ours = load_bilm(model_dir)
        ours_uncached = optimize_for_inference(load_bilm(model_dir, optimize=False), char_cache_size=0)
    systems: Dict[str, Callable[[Sequence[Sequence[str]]], List[np.ndarray]]] = {
        "efml": lambda batch: efml_call(efml, batch),
        "ours": lambda batch: ours.embed(batch),
        "ours_no_cache": lambda batch: ours_uncached.embed(batch),
    }
    workloads = {"batch": [sentences], "single": [[s] for s in singles]}
    reset = efml.model.encoder.reset_states
    report["workloads"] = {name: run_workload(systems, runs, args.repeats, reset) for name, runs in workloads.items()}
    report["inference_path"] = inference_path()
    report["seconds"] = time.time() - started
    text = markdown(report)
    print(text)
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    if args.markdown:
        Path(args.markdown).write_text(text, encoding="utf-8")
    return report


def parse_args(argv: Optional[List[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--sentences", type=int, default=64, help="sentences in the batch workload")
    parser.add_argument("--single", type=int, default=8, help="of those, how many run one at a time")
    parser.add_argument("--seed", type=int, default=1, help="torch seed of EFML's initialization")
    parser.add_argument("--json", default=None)
    parser.add_argument("--markdown", default=None)
    add_data_options(parser, test=True, train=True)
    return resolve_data_options(parser.parse_args(argv))


def published_architecture() -> Dict:
    """EFML's packaged config of its published models."""
    import elmoformanylangs

    path = Path(elmoformanylangs.__file__).parent / "configs" / PUBLISHED_CONFIG
    return json.loads(path.read_text(encoding="utf-8"))


def describe_model(model_dir: Path, config: Dict, train: Path) -> Dict:
    def entries(name: str) -> int:
        return len((model_dir / name).read_text(encoding="utf-8").splitlines())

    return {
        "architecture": PUBLISHED_CONFIG,
        "encoder": config["encoder"],
        "token_embedder": config["token_embedder"],
        "n_chars": entries("char.dic"),
        "n_words": entries("word.dic"),
        "vocabulary_source": f"EFML's trainer on {display_path(train)} (min_count 1)",
        "initialization": "EFML's own (block-orthogonal LSTM weights, forget bias 1; torch defaults elsewhere)",
        "megabytes": round(sum(p.stat().st_size for p in model_dir.iterdir()) / 1e6, 1),
    }


def efml_call(embedder, batch: Sequence[Sequence[str]]) -> List[np.ndarray]:
    with torch.no_grad():
        return embedder.sents2elmo(batch, output_layer=-2)


def run_workload(
    systems: Dict[str, Callable], runs: List[List[List[str]]], repeats: int, reset_efml: Callable[[], None]
) -> Dict:
    """Each system over all ``runs``, ``repeats`` times, interleaved call by call (the order alternating),
    so that the machine's load moves all of them alike; ``reset_efml`` (untimed) before each EFML call."""
    order = list(systems)
    for name in order:  # untimed: one-off costs (buffers, the compiled loop, EFML's first allocations)
        reset_efml()
        systems[name](runs[0])
    times: Dict[str, List[float]] = {name: [] for name in order}
    outputs: Dict[str, List[np.ndarray]] = {}
    for repeat in range(repeats):
        elapsed = dict.fromkeys(order, 0.0)
        produced: Dict[str, List[np.ndarray]] = {name: [] for name in order}
        for call, batch in enumerate(runs):
            for name in order if (repeat + call) % 2 == 0 else order[::-1]:
                if name == "efml":
                    reset_efml()
                start = time.perf_counter()
                produced[name].extend(systems[name](batch))
                elapsed[name] += time.perf_counter() - start
        for name in order:
            times[name].append(elapsed[name])
            outputs.setdefault(name, produced[name])
            same = all(np.array_equal(a, b) for a, b in zip(outputs[name], produced[name]))
            assert same, f"{name} gave other outputs in repeat {repeat}"
        log(f"  repeat {repeat}: " + ", ".join(f"{n} {times[n][-1]:.2f}s" for n in order))
    tokens = sum(len(s) for batch in runs for s in batch)
    result: Dict = {"calls": len(runs), "tokens": tokens, "repeats": repeats, "systems": {}}
    for name, series in times.items():
        result["systems"][name] = {
            "seconds": series,
            "seconds_median": statistics.median(series),
            "tokens_per_s_median": tokens / statistics.median(series),
        }
    result["efml_max_abs"] = max(float(np.abs(a).max()) for a in outputs["efml"] if a.size)
    for name in order[1:]:
        ratios = [e / o for e, o in zip(times["efml"], times[name])]
        diff = max(_max_diff(a, b) for a, b in zip(outputs["efml"], outputs[name]))
        result["systems"][name].update(
            speedup_over_efml=ratios,
            speedup_median=statistics.median(ratios),
            speedup_range=[min(ratios), max(ratios)],
            max_abs_diff_vs_efml=diff,
        )
    return result


def _max_diff(a: np.ndarray, b: np.ndarray) -> float:
    assert a.shape == b.shape
    return float(np.abs(a - b).max()) if a.size else 0.0


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def markdown(report: Dict) -> str:
    p, m, s = report["provenance"], report["model"], report["sentences"]
    e = report["efml"]
    lines = [
        f"Command: `{report['command']}`",
        "",
        f"Recorded {p['date']} at commit {p['commit']}{' (dirty)' if p['dirty'] else ''}, on {p['cpu']} "
        f"({p['cpu_count']} CPUs; flags: {' '.join(p['cpu_flags'])}; torch {p['torch']}, CPU capability "
        f"{p['cpu_capability']}, {p['torch_threads']} threads for both).",
        f"EFML: elmoformanylangs {e['elmoformanylangs']} (unmodified; overrides {e['overrides']}), numpy {e['numpy']}. "
        f"Our optimized fp32 timestep loop: {report['inference_path']['compiled_loop']}.",
        "",
        f"Model: EFML's published architecture ({m['architecture']}: {m['encoder']['n_layers']} x "
        f"{m['encoder']['dim']} cells, projection {m['encoder']['projection_dim']}, "
        f"{sum(n for _, n in m['token_embedder']['filters'])} CNN filters, {m['token_embedder']['n_highway']} highway, "
        f"word_dim {m['token_embedder']['word_dim']}), built and saved by EFML's own classes with its own random "
        f"initialization; {m['n_chars']} chars and {m['n_words']} words from {m['vocabulary_source']}; "
        f"{m['megabytes']} MB on disk, loaded by both.",
        f"Sentences: {s['count']} ({s['tokens']} tokens), {s['source']}; one at a time: the first {s['single']} "
        f"({s['single_tokens']} tokens).",
        "",
        "EFML runs `Embedder.sents2elmo(sentences, output_layer=-2)` after `encoder.reset_states()` (untimed), ours "
        "`load_bilm(dir).embed(sentences)`; interleaved call by call, alternating which goes first. Each repeat's outputs "
        "equal the first repeat's exactly, for every system. Speedup = EFML's time / ours, "
        "per repeat: median and range. Max abs diff: every layer of every sentence against EFML's (each "
        "EFML call from a fresh state). Each system ran once, untimed, before the repeats. EFML's outputs reach "
        f"{max(w['efml_max_abs'] for w in report['workloads'].values()):.2f} in absolute value.",
        "",
    ]
    names = {
        "efml": "EFML 0.0.4.post2 `sents2elmo`",
        "ours": "ours, `load_bilm(dir)` (optimized fp32, char cache 20000, warm)",
        "ours_no_cache": "ours, optimized fp32, char cache off",
    }
    for workload, title in (("batch", "one batch"), ("single", "one sentence at a time")):
        w = report["workloads"][workload]
        lines += [
            f"| {title}: {w['tokens']} tokens, {w['calls']} call(s), {w['repeats']} repeats | tokens/s (median) "
            "| speedup over EFML: median | range | max abs diff vs EFML |",
            "|---|---:|---:|---:|---:|",
        ]
        for name, entry in w["systems"].items():
            if name == "efml":
                lines.append(f"| {names[name]} | {entry['tokens_per_s_median']:.1f} | 1.00 | | |")
            else:
                low, high = entry["speedup_range"]
                lines.append(
                    f"| {names[name]} | {entry['tokens_per_s_median']:.1f} | {entry['speedup_median']:.2f} "
                    f"| {low:.2f}-{high:.2f} | {entry['max_abs_diff_vs_efml']:.1e} |"
                )
        lines.append("")
    lines.append(f"Run time: {report['seconds']:.0f} s.")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
