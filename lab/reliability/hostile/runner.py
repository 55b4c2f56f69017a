"""Load hostile-file cases the way a user does, in a child process, within a time and a memory budget,
and judge each outcome.

The child (``python -m lab.reliability.hostile.runner``, cases as JSON on stdin) imports the package,
loads an intact fixture once (the baseline), caps its address space (``RLIMIT_AS``, a guard against the
machine's OOM killer) and then, case by case: resets its peak RSS (``/proc/self/clear_refs``), calls
``spacy_elmo.load_bilm`` (``model=`` or ``options=`` + ``weights=``), and reports the outcome, the
seconds, the peak RSS and every file the case left behind (in the corpus, its private temporary
folder and its cache folder). The parent gives each case ``SECONDS`` from its start: a child that
overruns is killed (``hang``), one that dies is a ``crash``; the rest of its cases go to a new child.
``dump_case`` runs the command line (``python -m spacy_elmo dump``) on one case.

Verdicts (``judge``): ``refused`` (a ``ModelFileError`` with a one-line message naming a file the user
gave) and, for a case whose damage may leave a model, ``loaded`` pass; ``failed`` (any other
exception), ``unclear`` (a message that names no file of the user's or spans lines), ``accepted`` (a
damaged model that must not load loaded), ``hang``, ``crash``, ``slow``, ``over-memory`` and
``left-files`` fail.
"""
import json
import os
import queue
import re
import resource
import shutil
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Callable, Dict, Iterable, List, Optional, Sequence

from .cases import Case

CHECKOUT = Path(__file__).resolve().parents[3]
SECONDS = 10.0
MEMORY_MB = 1024  # above the child's RSS after its imports and the intact load
ADDRESS_MARGIN = 3 << 30  # RLIMIT_AS: the child's address space after the warm-up, plus this
START_SECONDS = 120.0  # a child's imports and warm-up, on a busy machine
PASSING = ("refused", "loaded")
# what a command's failure is recorded as when it ends on its one error line, without a traceback
COMMAND_ERROR = "error line"
# the libraries whose own exceptions must never reach the user
FOREIGN = ("torch", "h5py", "zipfile", "tarfile", "json", "struct", "numpy", "safetensors", "gzip", "zlib")


def _private_dirs(root: Path) -> Dict[str, Path]:
    return {"tmp": root / "_tmp", "cache": root / "_cache", "escaped": root / "_escaped"}


def _listing(root: Path) -> set:
    found = set()
    for folder, dirs, files in os.walk(root):
        found.update(os.path.join(folder, name) for name in dirs + files)
    return found


def _status(field: str) -> int:
    """A VmXXX field of /proc/self/status, in KiB (0 where there is none)."""
    match = re.search(rf"^{field}:\s+(\d+)", Path("/proc/self/status").read_text(), re.MULTILINE)
    return int(match.group(1)) if match else 0


def _reset_peak_rss() -> None:
    """Start the peak RSS (VmHWM) again from the current RSS; where the kernel does not allow it, the
    peak stays the child's so far, an upper bound of the case's."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass


def _origin(error: BaseException) -> str:
    """The module the exception came from: its innermost frame's file, by its last two parts."""
    frames = traceback.extract_tb(error.__traceback__)
    return "/".join(Path(frames[-1].filename).parts[-2:]) if frames else ""


def _child(request: dict) -> None:
    import torch

    from spacy_elmo import load_bilm
    from spacy_elmo.io import ModelFileError

    torch.set_num_threads(1)
    root = Path(request["root"])
    load_bilm(request["warmup"])  # what every case shares: the imports, the kernels, the allocator's pools
    baseline = _status("VmRSS") / 1024
    limit = _status("VmSize") * 1024 + ADDRESS_MARGIN
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    for item in request["cases"]:
        case = Case(**item)
        print(json.dumps({"start": case.name}), flush=True)
        before = _listing(root)
        _reset_peak_rss()
        start = time.monotonic()
        result = {"name": case.name}
        try:
            if case.weights:
                load_bilm(options=root / case.model, weights=root / case.weights)
            else:
                load_bilm(root / case.model)
            result["outcome"] = "loaded"
        except ModelFileError as error:
            result.update(outcome="error", error="ModelFileError", message=str(error))
        except BaseException as error:  # noqa: BLE001 - every other exception is what the corpus looks for
            result.update(outcome="error", error=type(error).__name__, message=str(error)[:500], origin=_origin(error))
        result["seconds"] = round(time.monotonic() - start, 3)
        result["rss_mb"] = round(_status("VmHWM") / 1024, 1)
        result["growth_mb"] = round(result["rss_mb"] - baseline, 1)
        result["left"] = sorted(os.path.relpath(p, root) for p in _listing(root) - before)
        print(json.dumps(result), flush=True)


def _reader(stream, lines: "queue.Queue") -> None:
    for line in stream:
        lines.put(line)
    lines.put(None)


def _environment(root: Path) -> Dict[str, str]:
    from spacy_elmo.fast import kernel_library

    dirs = _private_dirs(root)
    for folder in dirs.values():
        folder.mkdir(parents=True, exist_ok=True)
    return {**os.environ, "TMPDIR": str(dirs["tmp"]), "SPACY_ELMO_CACHE": str(dirs["cache"]),
            "SPACY_ELMO_KERNELS": str(kernel_library.kernel_dir()), "OMP_NUM_THREADS": "1",
            "PYTHONPATH": os.pathsep.join([str(CHECKOUT), os.environ.get("PYTHONPATH", "")])}


def run_cases(cases: Sequence[Case], root: Path, *, warmup: Path, seconds: float = SECONDS,
              log: Optional[Callable[[dict], None]] = None) -> List[dict]:
    """Load every case in child processes (one after another; a new child after a hang or a crash).

    RETURNS (List[dict]): per case, in order: name, layout, kind, may_load, outcome, verdict, seconds,
        rss_mb and growth_mb (peak RSS, and above the child's baseline), and error, message, origin,
        left where there are some. ``log``: called with each case's raw result as it comes.
    """
    root = Path(root)
    pending = list(cases)
    results: Dict[str, dict] = {}
    while pending:
        request = {"root": str(root), "warmup": str(warmup), "cases": [c.as_dict() for c in pending]}
        process = subprocess.Popen([sys.executable, "-m", "lab.reliability.hostile.runner"], stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_environment(root),
                                   start_new_session=True)
        lines: "queue.Queue" = queue.Queue()
        threading.Thread(target=_reader, args=(process.stdout, lines), daemon=True).start()
        errors: List[str] = []
        threading.Thread(target=lambda: errors.extend(process.stderr), daemon=True).start()
        process.stdin.write(json.dumps(request))
        process.stdin.close()
        current: Optional[str] = None
        deadline = time.monotonic() + START_SECONDS
        while True:
            try:
                line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:  # the case overran its time: kill the child, go on in a new one
                os.killpg(process.pid, 9)
                process.wait()
                if current is None:
                    raise RuntimeError(f"the child did not start in {START_SECONDS} s: {''.join(errors)[-2000:]}")
                results[current] = {"name": current, "outcome": "hang", "seconds": seconds,
                                    "left": _left_after_kill(root)}
                if log is not None:
                    log(results[current])
                break
            if line is None:  # the child ended
                process.wait()
                if current is not None:
                    results[current] = {"name": current, "outcome": "crash", "returncode": process.returncode,
                                        "message": "".join(errors)[-500:], "left": _left_after_kill(root)}
                    if log is not None:
                        log(results[current])
                elif process.returncode != 0:
                    raise RuntimeError(f"the child failed: {''.join(errors)[-2000:]}")
                break
            message = json.loads(line)
            if "start" in message:
                current = message["start"]
                deadline = time.monotonic() + seconds
            else:
                results[message["name"]] = message
                if log is not None:
                    log(message)
                current = None
        pending = [c for c in pending if c.name not in results]
    return [judge(case, results[case.name], root) for case in cases]


def _left_after_kill(root: Path) -> List[str]:
    """What a killed child left in its private folders (they are emptied for the next child)."""
    left = []
    for folder in _private_dirs(root).values():
        for path in sorted(_listing(folder)):
            left.append(os.path.relpath(path, root))
    for folder in _private_dirs(root).values():
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir()
    return left


def judge(case: Case, result: dict, root: Path, *, seconds: float = SECONDS) -> dict:
    """The verdict on one case's result (see the module docstring), with the case's fields; ``seconds``:
    its time budget."""
    verdict = result["outcome"]
    if verdict == "error":
        message = result.get("message", "")
        named = any(path in message for path in case.paths(root))
        if result.get("error") not in ("ModelFileError", COMMAND_ERROR):
            verdict = "failed"
        elif "\n" in message.strip() or not named:
            verdict = "unclear"
        else:
            verdict = "refused"
    elif verdict == "loaded" and not case.may_load:
        verdict = "accepted"
    if verdict in PASSING and result.get("growth_mb", 0) > MEMORY_MB:
        verdict = "over-memory"
    if verdict in PASSING and result.get("seconds", 0) > seconds:
        verdict = "slow"
    if verdict in PASSING and result.get("left"):
        verdict = "left-files"
    out = {"name": case.name, "layout": case.layout, "kind": case.kind, "may_load": case.may_load, **result,
           "verdict": verdict}
    if "message" in out:
        out["message"] = portable_text(out["message"], root)
    return out


def portable_text(text: str, root: Path) -> str:
    """A message as a record keeps it: the corpus's files by their path inside it, the checkout and
    Python's folders by name, and any other absolute or climbing path (a link's target, a member's
    name) marked with a leading "…" so that it reads as quoted, not as a path of this machine."""
    for folder, name in ((Path(root), ""), (CHECKOUT, "CHECKOUT/"), (Path(sys.base_prefix), "PYTHON/"),
                         (Path(sys.prefix), "PYTHON/")):
        text = text.replace(str(folder) + os.sep, name).replace(str(folder), name.rstrip("/") or "CORPUS")
    return re.sub(r"(^|[\s=:,(\['\"])(/|~/|\.\./)", r"\1…\2", text)


# ``python -m spacy_elmo ARGS`` that writes its peak resident memory (VmHWM, KiB) to argv[1] as it exits
PEAK_REPORTING_MAIN = """\
import atexit, runpy, sys
def report(path=sys.argv[1]):
    with open("/proc/self/status") as status, open(path, "w") as out:
        out.write(next(line.split()[1] for line in status if line.startswith("VmHWM:")))
atexit.register(report)
sys.argv = ["spacy_elmo", *sys.argv[2:]]
runpy.run_module("spacy_elmo", run_name="__main__", alter_sys=True)
"""


def dump_case(case: Case, root: Path, *, seconds: float = 60.0) -> dict:
    """``python -m spacy_elmo dump --model CASE`` (``--options --weights`` for a pair) on one sentence,
    in its own interpreter: the outcome is its exit status and its error line (a ``Traceback`` fails)."""
    out = root / "_dump"
    out.mkdir(exist_ok=True)
    (out / "input.txt").write_text("a small sentence\n", encoding="utf-8")
    given = (["--options", str(root / case.model), "--weights", str(root / case.weights)] if case.weights
             else ["--model", str(root / case.model)])
    peak = out / "peak_kib"
    peak.unlink(missing_ok=True)
    command = [sys.executable, "-c", PEAK_REPORTING_MAIN, str(peak), "dump", *given, "--input", str(out / "input.txt"),
               "--output", str(out / "layers.hdf5")]
    environment = _environment(root)  # makes the private folders, which are no file the command left
    before = _listing(root) - _listing(out)
    start = time.monotonic()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                               env=environment, start_new_session=True)
    killed: List[bool] = []
    timer = threading.Timer(seconds, lambda: (killed.append(True), os.killpg(process.pid, 9)))
    timer.start()
    stderr = process.stderr.read()
    _, status, usage = os.wait4(process.pid, 0)  # the child's own peak RSS, not the largest child's
    timer.cancel()
    process.returncode = os.waitstatus_to_exitcode(status)
    outcome = "hang" if killed else "loaded" if process.returncode == 0 else "error"
    # the command's own peak (VmHWM, written at its exit); wait4's ru_maxrss would be the larger of it and
    # this process's RSS when it started the command, which Linux carries over exec
    rss_mb = int(peak.read_text()) / 1024 if peak.is_file() else usage.ru_maxrss / 1024
    peak.unlink(missing_ok=True)
    # the package's "error: ..." line, or click's "Error: Invalid value: ..." for an option it checks
    lines = [line for line in stderr.splitlines() if line.startswith(("error:", "Error:"))]
    result = {"name": case.name, "outcome": outcome, "seconds": round(time.monotonic() - start, 3),
              "rss_mb": round(rss_mb, 1), "returncode": process.returncode,
              "left": sorted(os.path.relpath(p, root) for p in (_listing(root) - _listing(out)) - before)}
    if outcome == "error":
        traced = "Traceback" in stderr
        result.update(error="Traceback" if traced else COMMAND_ERROR,
                      message=stderr.strip()[-500:] if traced or not lines else lines[-1])
    judged = judge(case, result, root, seconds=seconds)  # the whole command, its interpreter's start included
    judged["name"] = case.name + "@dump"
    return judged


def summary(results: Iterable[dict]) -> dict:
    """Counts by verdict, the slowest case, and the largest peak RSS of a load in the runner's child and
    of a whole command (its interpreter included)."""
    results = list(results)
    timed = [r for r in results if r.get("growth_mb") is not None]  # loaded in the runner's child
    counts: Dict[str, int] = {}
    for r in results:
        counts[r["verdict"]] = counts.get(r["verdict"], 0) + 1
    slowest = max(results, key=lambda r: r.get("seconds", 0))
    largest = max(timed, key=lambda r: r["rss_mb"]) if timed else None
    commands = [r for r in results if r["name"].endswith("@dump") and "rss_mb" in r]
    command = max(commands, key=lambda r: r["rss_mb"]) if commands else None
    return {"cases": len(results), "verdicts": dict(sorted(counts.items())),
            "passed": all(r["verdict"] in PASSING for r in results),
            "slowest": {"name": slowest["name"], "seconds": slowest.get("seconds")},
            "largest_rss": {"name": largest["name"], "rss_mb": largest["rss_mb"],
                            "growth_mb": largest.get("growth_mb")} if largest else None,
            "largest_command_rss": ({"name": command["name"], "rss_mb": command["rss_mb"]} if command else None)}


if __name__ == "__main__":
    _child(json.loads(sys.stdin.read()))
