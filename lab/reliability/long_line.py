"""One very long line without a newline through every command that reads text: each finishes within
a memory budget, or refuses in one line, never a traceback, never a number scored from nothing.

    python -m lab.reliability.long_line --output results/reliability/long-line.json

Writes one line of ``--bytes`` (default 5,000,000) characters, the ``# text =`` sentences of
``--texts`` (a CoNLL-U file) repeated and joined by spaces, and runs ``neighbors``, ``usages``,
``evaluate`` and ``dump`` on it with ``--model`` (default: the shipped biLM), each in its own
interpreter that reports its own peak resident memory (VmHWM) as it exits. A command passes when it
does what ``EXPECTED`` says (runs the line, exit 0; or, for ``evaluate``, may refuse it with one
``error:`` / ``Error:`` line and no traceback), and its peak stays under ``--budget-mb`` (2 GB). The record gives each command's line, outcome, seconds and peak.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from spacy_elmo.files import write_atomic
from spacy_elmo.records.provenance import data_record, mark_start, model_record, provenance

from lab.reliability.hostile.runner import PEAK_REPORTING_MAIN

CHECKOUT = Path(__file__).resolve().parents[2]
TEXTS = CHECKOUT / "sample" / "ewt" / "train.conllu"
BUDGET_MB = 2048
QUERY, WORD = "She sat on the bank of the river and watched the boats go by .", "bank"
TARGETS = ("bank", "house", "office")
# what each command should do with the line: run it in windows, or (evaluate, which scores sentences and
# skips lines over its limit) refuse with one line since nothing is left to score
EXPECTED = {"neighbors": ("ran",), "usages": ("ran",), "evaluate": ("ran", "refused"), "dump": ("ran",)}


def long_line(texts: Path, size: int) -> str:
    """``size`` characters of the file's ``# text =`` sentences, repeated, joined by spaces (no newline)."""
    sentences = [line[len("# text = "):].strip() for line in texts.read_text(encoding="utf-8").splitlines()
                 if line.startswith("# text = ")]
    block = " ".join(s for s in sentences if s)
    if not block:
        raise SystemExit(f"{texts}: no '# text =' lines to build the line from")
    return (block + " ") * (size // (len(block) + 1)) + block[: size % (len(block) + 1)]


def commands(line: Path, work: Path, model: Optional[str]) -> Dict[str, List[str]]:
    """Each command's arguments (after ``python -m spacy_elmo``)."""
    given = ["--model", str(Path(model).resolve()) if Path(model).exists() else model] if model else []
    targets = work / "targets.txt"
    targets.write_text("\n".join(TARGETS) + "\n", encoding="utf-8")
    return {
        "neighbors": ["neighbors", "--input", str(line), "--query", QUERY, "--word", WORD, *given],
        "usages": ["usages", "--input", str(line), "--targets", str(targets), "--output", str(work / "u.parquet"),
                   *given],
        "evaluate": ["evaluate", "--input", str(line), "--output", str(work / "evaluate.json"), *given],
        "dump": ["dump", "--input", str(line), "--output", str(work / "layers.hdf5"), *given],
    }


def _environment() -> Dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(CHECKOUT), os.environ.get("PYTHONPATH", "")])}


def finish_record(record: Dict, output: Optional[Path]) -> int:
    """Print a memory run's record (its provenance aside) and write it whole to ``output`` or not at
    all. RETURNS (int): the exit status, 0 where every case passed."""
    print(json.dumps({k: v for k, v in record.items() if k != "provenance"}, indent=1))
    if output is not None:
        output.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(output, (json.dumps(record, indent=1) + "\n").encode("utf-8"))
    return 0 if record["passed"] else 1


def run_command(arguments: List[str], work: Path, *, timeout: float, budget_mb: float,
                expected: Sequence[str] = ("ran", "refused")) -> dict:
    """One command in its own interpreter: outcome, seconds, peak RSS (its own VmHWM) and its last
    error line; ``passed`` as the module's docstring says."""
    peak = work / "peak_kib"
    peak.unlink(missing_ok=True)
    start = time.monotonic()
    try:
        done = subprocess.run([sys.executable, "-c", PEAK_REPORTING_MAIN, str(peak), *arguments], capture_output=True,
                              text=True, timeout=timeout, cwd=work, env=_environment())
        code, stderr = done.returncode, done.stderr
    except subprocess.TimeoutExpired as expired:
        code, stderr = None, (expired.stderr or b"").decode("utf-8", "replace")
    seconds = time.monotonic() - start
    peak_mb = int(peak.read_text()) / 1024 if peak.is_file() else None
    lines = [line for line in stderr.splitlines() if line.startswith(("error:", "Error:"))]
    traced = "Traceback" in stderr
    if code == 0:
        outcome = "ran"
    elif code is None:
        outcome = "timed out"
    else:
        outcome = "traceback" if traced or not lines else "refused"
    passed = outcome in expected and peak_mb is not None and peak_mb < budget_mb
    return {"outcome": outcome, "exit_code": code, "seconds": round(seconds, 1),
            "peak_mb": None if peak_mb is None else round(peak_mb, 1), "passed": passed,
            "message": ((lines[-1] if lines else stderr.strip()[-300:]) if code else None)}


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", type=Path, default=None, help="write the record here (JSON)")
    parser.add_argument("--model", default=None, help="the biLM (default: the shipped one)")
    parser.add_argument("--texts", type=Path, default=TEXTS, help="CoNLL-U file whose sentences make the line")
    parser.add_argument("--bytes", type=int, default=5_000_000, help="characters in the line")
    parser.add_argument("--commands", default="neighbors,usages,evaluate,dump", help="which commands, comma-separated")
    parser.add_argument("--budget-mb", type=float, default=BUDGET_MB, help="peak resident memory a command may reach")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds a command may take")
    args = parser.parse_args(argv)
    mark_start()
    results = {}
    with tempfile.TemporaryDirectory(prefix="long-line-") as folder:
        work = Path(folder)
        line = work / "line.txt"
        line.write_text(long_line(args.texts, args.bytes), encoding="utf-8")
        chosen = commands(line, work, args.model)
        for name in args.commands.split(","):
            results[name] = {"command": "python -m spacy_elmo " + " ".join(
                a.replace(folder, "TMP") for a in chosen[name]),
                **run_command(chosen[name], work, timeout=args.timeout, budget_mb=args.budget_mb, expected=EXPECTED[name])}
            if results[name]["message"]:  # the record names the line by its folder's stand-in, not this machine's
                results[name]["message"] = results[name]["message"].replace(folder, "TMP")
            print(f"{name}: {results[name]['outcome']} in {results[name]['seconds']} s, peak "
                  f"{results[name]['peak_mb']} MB", file=sys.stderr, flush=True)
    record = {
        "provenance": provenance(model=model_record(args.model), model_note="the biLM every command ran",
                                 data=data_record(args.texts), data_note="the sentences the line repeats"),
        "line_characters": args.bytes, "newlines": 0, "budget_mb": args.budget_mb,
        "passed": all(r["passed"] for r in results.values()), "commands": results,
    }
    return finish_record(record, args.output)


if __name__ == "__main__":
    sys.exit(main())
