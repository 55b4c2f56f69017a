"""Time to the first doc of a new user's process on a fresh cache: the platform wheel (its kernels
prebuilt) beside the checkout's source path (the kernels compiled at the first doc).

    python -m bench.bench_first_doc --rounds 3 --json results/bench/MACHINE/first-doc.json

The wheel is built from the checkout (``lab.release.package_pipeline.build_spacy_elmo_wheel``, the
setup.py of the release) and installed into a fresh venv that sees this environment's packages
(``fresh_venv``). Each round runs both paths in a new process, in alternating order:

- wheel: the venv's Python, no compiler reachable, an empty cache (``without_compiler``);
- source: this environment's Python and its editable install of the checkout, the system's
  compiler, an empty cache: what a user of the source distribution waits for once per machine.

Each run is ``package_pipeline.FIRST_DOC``: ``import spacy, spacy_elmo``, ``nlp.add_pipe("elmo")``
with the shipped biLM, and the first doc, timed by the wall clock in the process (interpreter start
not included), with the loop its passes took and where its kernels came from. The record gives
every run, with the load average before it (the machine may be shared), and per path the median
and range of the seconds to the first doc.
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

from spacy_elmo.records.provenance import mark_start, model_record, provenance

from lab.release.package_pipeline import FIRST_TEXT, build_spacy_elmo_wheel, first_doc, fresh_venv, without_compiler

from .bandwidth import cpu_record
from .workloads import bench_command

PATHS = ("wheel", "source")
TIMES = ("import_s", "add_pipe_s", "first_doc_s", "to_first_doc_s")


def main(argv: Optional[List[str]] = None) -> Dict[str, Any]:
    args = parse_args(argv)
    command = bench_command("bench.bench_first_doc", argv)
    mark_start(command)
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="bench-first-doc-") as tmp:
        work = Path(tmp)
        wheel = build_spacy_elmo_wheel(work / "dist")
        python = fresh_venv(work / "venv", [wheel])
        runs: List[Dict[str, Any]] = []
        for round_index in range(args.rounds):
            order = PATHS if round_index % 2 == 0 else PATHS[::-1]
            for path in order:
                cache = work / f"cache-{round_index}-{path}"
                load = os.getloadavg()[0]
                result = first_doc_of(path, python, cache, work)
                runs.append({"round": round_index, "path": path, "load_average_before": round(load, 2),
                             **{key: round(result[key], 3) for key in TIMES},
                             "loops": sorted(set(result["paths"]), key=str),
                             "kernels": {key: result["kernels"][key] for key in ("variant", "source", "loaded")}})
                print(json.dumps(runs[-1]), flush=True)
    report = {
        "command": command,
        "machine": {**cpu_record(), "load_average_after": round(os.getloadavg()[0], 2)},
        "wheel": wheel.name,
        "text": FIRST_TEXT,
        "runs": runs,
        "summary": summary(runs),
    }
    report["provenance"] = provenance(model=model_record(), data={},
                                      data_note="one sentence written in the benchmark (FIRST_TEXT), no file read")
    report["seconds"] = round(time.time() - started, 1)
    print(json.dumps(report["summary"], indent=2))
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return report


def first_doc_of(path: str, venv_python: Path, cache: Path, work: Path) -> Dict[str, Any]:
    """One new process's first doc on ``path`` ("wheel" or "source") with an empty ``cache``."""
    if path == "wheel":
        return first_doc(venv_python, without_compiler(venv_python, cache), cwd=work)
    cache.mkdir(parents=True)
    kept = {k: v for k, v in os.environ.items() if k not in ("SPACY_ELMO_KERNELS", "PYTHONPATH")}
    return first_doc(Path(sys.executable), {**kept, "SPACY_ELMO_CACHE": str(cache), "XDG_CACHE_HOME": str(cache)},
                     cwd=work)


def summary(runs: List[Dict[str, Any]]) -> Dict[str, Any]:
    """Per path: the median, lowest and highest of each time, and the loops and kernels it ran."""
    found: Dict[str, Any] = {}
    for path in PATHS:
        mine = [run for run in runs if run["path"] == path]
        found[path] = {
            **{key: {"median": round(statistics.median(r[key] for r in mine), 3),
                     "min": min(r[key] for r in mine), "max": max(r[key] for r in mine)} for key in TIMES},
            "loops": sorted({loop for r in mine for loop in r["loops"]}, key=str),
            "kernels": sorted({r["kernels"]["source"] or "none" for r in mine}),
        }
    found["source_over_wheel"] = round(found["source"]["to_first_doc_s"]["median"]
                                       / found["wheel"]["to_first_doc_s"]["median"], 1)
    return found


def parse_args(argv: Optional[List[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="rounds of both paths (each source run compiles)")
    parser.add_argument("--json", type=Path, help="where the record goes (results/bench/MACHINE/first-doc.json)")
    return parser.parse_args(argv)


if __name__ == "__main__":
    main()
