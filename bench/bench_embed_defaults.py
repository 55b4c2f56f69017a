"""embed-corpus as a user runs it, with its defaults now against the defaults of an earlier commit.

    python -m bench.bench_embed_defaults --tokens 1000000 --rounds 2 --baseline-commit 26675ff \
        --json results/bench/amd-f25-m17/embed-defaults.json --markdown results/bench/amd-f25-m17/embed-defaults.md

The corpus is real text from the shared datasets folder (``--data-dir``): Austen, Melville,
WikiText-2 and the 1B Word Benchmark's held-out text, six files, three of them ``.gz``, cut to
``--tokens`` whitespace tokens in all. Each run is the whole command in its own process
(``python -m spacy_elmo embed-corpus --input CORPUS --output FRESH_FOLDER``, nothing else given):
a local Ray started and stopped, the shipped model loaded in each actor, every shard written. The
baseline is the same command from ``--baseline-commit``'s tree (``git archive``), whose default on
a machine of two CPUs was one actor (and Ray's niceness for its workers, 15, under which actors get
only what the machine's other work leaves them; each run records its actors' niceness). Runs
alternate between the two, round by round (A B, then
B A), after one untimed warm-up run of each on a small corpus (imports, the compiled LSTM step);
the machine is shared, so the record keeps the load average before and after each run, and what
counts is the ratio of the two in the same rounds.

Memory, sampled every quarter second while a run goes: the whole machine's used memory
(MemTotal - MemAvailable, /proc/meminfo), its peak and its value just before the run; and the
summed resident memory of the command's process tree (the driver, Ray's processes, the actors).
"""
import argparse
import gzip
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from spacy_elmo.io.loading import shipped_model_dir
from spacy_elmo.records.provenance import data_record, mark_start, model_record, provenance

from .workloads import REPO, bench_command, write_report

# (dataset file, written compressed): the corpus of a user who embeds books, an encyclopaedia and news
SOURCES: Tuple[Tuple[str, bool], ...] = (
    ("lm_gutenberg_nltk2008/austen-emma.txt", False),
    ("lm_gutenberg_nltk2008/austen-persuasion.txt", True),
    ("lm_gutenberg_nltk2008/melville-moby_dick.txt", True),
    ("lm_wikitext2/valid.txt", False),
    ("lm_wikitext2/test.txt", True),
    ("lm_1b_benchmark_heldout/1b_benchmark.dev.tokens", False),
)
# the datasets as the probes find them: $SPACY_ELMO_DATA, else the project assets in the checkout
DEFAULT_DATA = Path(os.environ.get("SPACY_ELMO_DATA") or REPO / "assets" / "datasets")
REPORTED = re.compile(r"(\d+) rows, (\d+) tokens in [\d.]+ s; (\d+) actors")


def add_corpus_options(parser: argparse.ArgumentParser) -> None:
    """The options of the embed-corpus benchmarks: where the datasets are, and where the record goes."""
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--json")
    parser.add_argument("--markdown")


def write_corpus(data_dir: Path, folder: Path, tokens: int) -> Dict[str, Any]:
    """The corpus files under ``folder``: each source's lines in order until ``tokens`` whitespace
    tokens are written in all (the last file cut at a line). RETURNS: files, lines, tokens, sources."""
    folder.mkdir(parents=True, exist_ok=True)
    total, lines, written = 0, 0, []
    for name, compressed in SOURCES:
        if total >= tokens:
            break
        kept = []
        for line in (data_dir / name).read_text(encoding="utf-8").splitlines():
            if total >= tokens:
                break
            kept.append(line)
            total += len(line.split())
        data = ("\n".join(kept) + "\n").encode("utf-8")
        target = folder / (Path(name).name + (".gz" if compressed else ""))
        target.write_bytes(gzip.compress(data, mtime=0) if compressed else data)
        lines += len(kept)
        written.append(name)
    return {"files": len(written), "lines": lines, "tokens": total, "sources": written}


def baseline_tree(commit: str, where: Path) -> Path:
    """The package as it was at ``commit`` (``git archive`` of this checkout), under ``where``."""
    where.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "-C", str(REPO), "archive", commit, "spacy_elmo"], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(where)], input=archive, check=True)
    return where


def machine_used() -> int:
    """Bytes of memory the whole machine uses now (MemTotal - MemAvailable)."""
    info = dict(line.split(":", 1) for line in Path("/proc/meminfo").read_text().splitlines())
    return (int(info["MemTotal"].split()[0]) - int(info["MemAvailable"].split()[0])) * 1024


def tree_memory(pid: int, niceness: set) -> int:
    """Summed resident bytes of a process and every process below it; the niceness of its actors
    (Ray's ``MapWorker`` processes) is added to ``niceness``."""
    import psutil

    try:
        root = psutil.Process(pid)
        processes = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0
    total = 0
    for process in processes:
        try:
            total += process.memory_info().rss
            if "MapWorker" in " ".join(process.cmdline()):
                niceness.add(process.nice())
        except psutil.NoSuchProcess:
            pass
    return total


def run_command(tree: Path, corpus: Path, output: Path) -> Dict[str, Any]:
    """The whole command from ``tree`` in its own process, sampled for memory while it runs."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    before = machine_used()
    load_before = list(os.getloadavg())
    peaks = {"machine": before, "tree": 0}
    niceness: set = set()
    start = time.perf_counter()
    process = subprocess.Popen([sys.executable, "-m", "spacy_elmo", "embed-corpus", "--input", str(corpus), "--output", str(output)],
                               cwd=tree, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.25):
            peaks["machine"] = max(peaks["machine"], machine_used())
            peaks["tree"] = max(peaks["tree"], tree_memory(process.pid, niceness))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out, err = process.communicate()
    seconds = time.perf_counter() - start
    done.set()
    sampler.join()
    if process.returncode != 0:
        raise RuntimeError(f"embed-corpus from {tree} failed ({process.returncode}): {err[-2000:]}")
    found = REPORTED.search(out)
    if found is None:
        raise RuntimeError(f"embed-corpus from {tree} printed no report: {out[-1000:]}")
    rows, tokens, actors = (int(g) for g in found.groups())
    return {
        "seconds": seconds, "rows": rows, "tokens": tokens, "actors": actors, "tokens_per_s": tokens / seconds,
        "machine_used_before_mib": before / 2**20, "machine_peak_mib": peaks["machine"] / 2**20,
        "machine_peak_above_before_mib": (peaks["machine"] - before) / 2**20, "tree_peak_rss_mib": peaks["tree"] / 2**20,
        "load_before": load_before, "load_after": list(os.getloadavg()), "report": out.strip().splitlines()[-1].replace(str(output), "OUTPUT"),
        "actor_niceness": sorted(niceness),
    }


def summary(runs: Sequence[Dict[str, Any]]) -> Dict[str, Any]:
    return {
        "median_s": statistics.median(r["seconds"] for r in runs),
        "median_tokens_per_s": statistics.median(r["tokens_per_s"] for r in runs),
        "actors": sorted({r["actors"] for r in runs}),
        "max_machine_peak_mib": max(r["machine_peak_mib"] for r in runs),
        "max_machine_peak_above_before_mib": max(r["machine_peak_above_before_mib"] for r in runs),
        "max_tree_peak_rss_mib": max(r["tree_peak_rss_mib"] for r in runs),
    }


def main(argv: Optional[List[str]] = None) -> Dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--baseline-commit", required=True)
    add_corpus_options(parser)
    args = parser.parse_args(argv)
    mark_start(bench_command("bench.bench_embed_defaults", argv))
    started = time.time()
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", args.baseline_commit], check=True, capture_output=True,
                            text=True).stdout.strip()
    runs: Dict[str, List[Dict[str, Any]]] = {"baseline": [], "current": []}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        corpus = write_corpus(args.data_dir, work / "corpus", args.tokens)
        write_corpus(args.data_dir, work / "warm-up", 2_000)
        trees = {"baseline": baseline_tree(commit, work / "baseline"), "current": REPO}
        for name, tree in trees.items():
            run_command(tree, work / "warm-up", work / f"warm-up-{name}")
        for round_ in range(args.rounds):
            for name in (("baseline", "current") if round_ % 2 == 0 else ("current", "baseline")):
                result = run_command(trees[name], work / "corpus", work / f"out-{name}-{round_}")
                runs[name].append(result)
                print(f"round {round_} {name}: {result['seconds']:.1f} s, {result['tokens_per_s']:.0f} tokens/s, "
                      f"{result['actors']} actors, machine peak +{result['machine_peak_above_before_mib']:.0f} MiB, "
                      f"tree {result['tree_peak_rss_mib']:.0f} MiB, load {result['load_before'][0]:.2f}", flush=True)
    rounds = [b["seconds"] / c["seconds"] for b, c in zip(runs["baseline"], runs["current"])]
    report = {
        "corpus": corpus, "baseline_commit": commit, "model": "spacy_elmo/models/en_small (shipped)",
        "machine": {"cpus": os.cpu_count(), "memory_mib": int(Path("/proc/meminfo").read_text().split()[1]) // 1024},
        "runs": runs, "baseline": summary(runs["baseline"]), "current": summary(runs["current"]),
        "speedup_per_round": rounds, "speedup_median": statistics.median(rounds),
        "speedup_of_medians": summary(runs["baseline"])["median_s"] / summary(runs["current"])["median_s"],
        "seconds": time.time() - started,
    }
    report["provenance"] = provenance(model=model_record(shipped_model_dir()),
                                      data=data_record([args.data_dir / name for name, _ in SOURCES if name in corpus["sources"]]))
    text = markdown(report)
    print(text)
    write_report(report, text, args.json, args.markdown)
    return report


def markdown(report: Dict[str, Any]) -> str:
    info, corpus = report["provenance"], report["corpus"]
    lines = [
        f"Command: `{info['command']}`", "",
        f"Recorded {info['date']} at commit {info['commit']}{' (dirty)' if info['dirty'] else ''}, on {info['cpu']} "
        f"({report['machine']['cpus']} CPUs, {report['machine']['memory_mib']} MiB).", "",
        f"Corpus: {corpus['tokens']} tokens, {corpus['lines']} lines in {corpus['files']} files. Baseline: commit "
        f"{report['baseline_commit'][:12]}'s defaults. Each run is the whole command in its own process.", "",
        "| run | median s | tokens/s | actors | machine peak above before (MiB) | process tree peak RSS (MiB) |",
        "|---|---:|---:|---|---:|---:|",
    ]
    for name in ("baseline", "current"):
        s = report[name]
        lines.append(f"| {name} | {s['median_s']:.1f} | {s['median_tokens_per_s']:.0f} | {s['actors']} | "
                     f"{s['max_machine_peak_above_before_mib']:.0f} | {s['max_tree_peak_rss_mib']:.0f} |")
    lines += ["", f"Speedup, same rounds: {', '.join(f'{r:.2f}' for r in report['speedup_per_round'])} "
              f"(median {report['speedup_median']:.2f})."]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
