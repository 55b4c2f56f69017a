"""embed-corpus's driver memory as the corpus grows: the driver's peak RSS at three corpus sizes.

    python -m bench.bench_embed_driver_memory --sizes-mb 8 32 128 --repeats 2 \
        --json results/bench/CPU/embed-driver-memory.json

Each corpus is a folder of two ``.gz`` text files whose lines hold a sentence's tokens with
``--padding`` spaces between them, so the bytes grow while the embedding work stays small (the
tokens decide it). Each run is a fresh Python process acting as the driver: it starts a local Ray,
embeds the folder with the shipped biLM and reports its own peak RSS (``ru_maxrss`` of the process,
Ray's own processes not counted). The baseline, in the same run and interleaved with it, is what
the driver of the earlier design held: a process that imports the same modules and reads every
line of the corpus into a list, as ``read_corpus`` did before the workers read the input.
"""
import argparse
import gzip
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Dict, List, Optional

from spacy_elmo.files import write_atomic
from spacy_elmo.records.provenance import mark_start, model_record, provenance

from .workloads import bench_command

SENTENCES = [
    "the bank of the river was green", "she deposited cash at the bank", "a quick brown fox jumps",
    "deep contextualized word representations", "they walked along the shore at night",
]
DRIVER = """
import resource, sys
mode, folder, out = sys.argv[1:4]
from spacy_elmo.embed.corpus import embed_corpus
from spacy_elmo.embed.inputs import file_blocks, resolve_inputs
if mode == "embed":
    report = embed_corpus(folder, out, progress=None, object_store_memory=200_000_000)
    rows = report.rows
else:  # the earlier design's driver: every line of the corpus in its memory
    files = resolve_inputs(folder)
    held = [text for i in range(len(files.paths)) for _, _, texts, _ in file_blocks(files, i, rows=1 << 30, strict=False) for text in texts]
    rows = len(held)
print(rows, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
"""


def write_corpus(folder: Path, size: int, padding: int) -> int:
    """Two .gz files of about ``size`` bytes uncompressed in all. RETURNS (int): their bytes uncompressed."""
    folder.mkdir(parents=True)
    written, i = 0, 0
    for name in ("part-0.txt.gz", "part-1.txt.gz"):
        with gzip.open(folder / name, "wt", encoding="utf-8", compresslevel=1) as handle:
            while written < size * (1 if name.startswith("part-1") else 0.5):
                words = SENTENCES[i % len(SENTENCES)].split()
                line = " ".join(words[:2]) + " " * padding + " ".join(words[2:]) + "\n"
                handle.write(line)
                written += len(line)
                i += 1
    return written


def run_driver(mode: str, folder: Path, out: Path) -> Dict[str, int]:
    result = subprocess.run([sys.executable, "-c", DRIVER, mode, str(folder), str(out)], capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"{mode} driver failed: {result.stderr[-2000:]}")
    rows, peak = result.stdout.strip().splitlines()[-1].split()
    return {"rows": int(rows), "peak_rss": int(peak)}


def main(argv: Optional[List[str]] = None) -> Dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes-mb", type=int, nargs="+", default=[8, 32, 128])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--padding", type=int, default=100_000)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    mark_start(bench_command("bench.bench_embed_driver_memory", argv))
    results: Dict[str, Dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        corpora = {mb: write_corpus(work / f"corpus-{mb}", mb << 20, args.padding) for mb in args.sizes_mb}
        runs: Dict[int, Dict[str, List[Dict[str, int]]]] = {mb: {"embed": [], "read_into_driver": []} for mb in args.sizes_mb}
        for repeat in range(args.repeats):
            sizes = args.sizes_mb if repeat % 2 == 0 else list(reversed(args.sizes_mb))
            for mb in sizes:
                modes = ("embed", "read_into_driver") if repeat % 2 == 0 else ("read_into_driver", "embed")
                for mode in modes:
                    found = run_driver(mode, work / f"corpus-{mb}", work / f"out-{mb}-{repeat}-{mode}")
                    runs[mb][mode].append(found)
                    print(f"repeat {repeat}: {mb} MB {mode}: peak RSS {found['peak_rss'] / 2**20:.0f} MiB, {found['rows']} rows", flush=True)
        for mb, by_mode in runs.items():
            results[str(mb)] = {
                "corpus_bytes": corpora[mb],
                **{
                    mode: {
                        "peak_rss_bytes": [r["peak_rss"] for r in found],
                        "median_peak_rss_mib": statistics.median(r["peak_rss"] for r in found) / 2**20,
                        "spread_mib": (max(r["peak_rss"] for r in found) - min(r["peak_rss"] for r in found)) / 2**20,
                        "rows": found[0]["rows"],
                    }
                    for mode, found in by_mode.items()
                },
            }
    from spacy_elmo.io.loading import shipped_model_dir

    result = {
        "provenance": provenance(model=model_record(shipped_model_dir()), data={},
                                 data_note="generated corpora: padded sentences, described in the script"),
        "padding": args.padding,
        "repeats": args.repeats,
        "results": results,
    }
    if args.json:
        write_atomic(args.json, (json.dumps(result, indent=2) + "\n").encode("utf-8"))
    return result


if __name__ == "__main__":
    main()
