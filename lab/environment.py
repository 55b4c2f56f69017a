"""Set up the project's environment if needed, then run the main job or the tests.

    python scripts/run.py main          # the whole project on the bundled sample (spacy project run main)
    python scripts/run.py tests [ARGS]  # the test suite (what CI runs); ARGS go to pytest

Needs only Python with venv and pip: the version setup.cfg's ``python_requires`` names (the pinned
torch's own floor), checked before anything is made, so that an older Python hears which one it
needs rather than pip's resolution failure on torch. The first call creates ``.venv`` in the checkout and
installs the CPU build of torch (pinned in requirements.txt) before the rest, so that pip never
pulls the multi-GB CUDA build; later calls reuse it while requirements.txt and the package's
setup files are unchanged (their SHA-256 is kept in ``.venv/spacy-elmo-env.json``). torch comes
from pip's own sources first (a local wheel or mirror, without network) and from PyTorch's CPU
index otherwise (``SPACY_ELMO_TORCH_INDEX`` sets another). Standard library only: this runs
before anything is installed.

After a successful ``main``, ``metrics/main-run.json`` records how long it took: the set-up (0 when
``.venv`` was reused; whether it was created, refreshed or reused), the job's wall time, the
command, and the results record of ``spacy_elmo.records.provenance`` (asked of the environment's Python,
which has the package): the commit the job started from, the shipped biLM the workflow starts from,
the sample files it reads, the machine and the date. ``tests`` records nothing. ``metrics/`` is
project.yml's ``vars.metrics``, an ignored folder like every output of ``main``: running it leaves
the checkout's tracked files as they were.
"""
import configparser
import datetime
import hashlib
import json
import os
import platform
import shlex
import subprocess
import sys
import time
import venv
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

ROOT = Path(__file__).resolve().parent.parent
ENV = ROOT / ".venv"
STAMP = ENV / "spacy-elmo-env.json"
SETUP_FILES = ("requirements.txt", "setup.cfg", "setup.py", "pyproject.toml")
CPU_INDEX = os.environ.get("SPACY_ELMO_TORCH_INDEX", "https://download.pytorch.org/whl/cpu")
COMMANDS = {
    "main": ["-m", "spacy", "project", "run", "main"],
    "tests": ["-m", "pytest", "tests", "-q", "-p", "no:cacheprovider", "--durations=25"],
}
RECORDED = ("main",)  # the jobs whose timing is written to RECORDS/JOB-run.json
RECORDS = "metrics"  # project.yml's vars.metrics (ignored by git)
# asked of the environment's Python: the record every results file carries. The main workflow
# (project.yml) starts from the shipped biLM and reads the bundled sample's folders below.
MAIN_DATA = ("corpus_sample/domain", "corpus_sample/eval", "sample/ewt", "sample/wnut17")
START = "import json; from spacy_elmo.records.provenance import start_snapshot; print(json.dumps(start_snapshot()))"
PROVENANCE = (
    "import json, sys; from spacy_elmo.records.provenance import data_record, model_record, provenance; "
    "print(json.dumps(provenance(sys.argv[1], start=json.loads(sys.argv[2]), model=model_record(), "
    "model_note='the shipped biLM the workflow fine-tunes and trains with', data=data_record(sys.argv[3:]))))"
)


def python_floor(setup_cfg: Path = ROOT / "setup.cfg") -> tuple:
    """The lowest Python setup.cfg's ``python_requires`` (``>=X.Y``) allows, as (X, Y)."""
    parser = configparser.ConfigParser()
    parser.read(setup_cfg, encoding="utf-8")
    required = parser.get("options", "python_requires", fallback="").replace(" ", "")
    if not required.startswith(">=") or "," in required:
        raise SystemExit(f"setup.cfg's python_requires is {required!r}, not >=X.Y as this script reads it")
    return tuple(int(part) for part in required[2:].split(".")[:2])


def python_refusal(version: Optional[Sequence[int]] = None, floor: Optional[tuple] = None) -> Optional[str]:
    """RETURNS (Optional[str]): the line that says which Python the project needs, where ``version``
    (default: this interpreter's) is older than setup.cfg allows; None where it will do."""
    floor = floor or python_floor()
    version = tuple(sys.version_info[:3]) if version is None else tuple(version)
    if version[:2] >= floor:
        return None
    need = ".".join(map(str, floor))
    return (f"spacy-elmo needs Python >= {need} (its pinned {torch_pin()} has no wheels for older ones); this is "
            f"Python {'.'.join(map(str, version))} at {sys.executable}: run this script with python{need} or newer")


def env_python() -> Path:
    return ENV / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def torch_pin() -> str:
    """The torch requirement of requirements.txt (``torch==X.Y.Z``)."""
    for line in (ROOT / "requirements.txt").read_text(encoding="utf-8").splitlines():
        requirement = line.split("#", 1)[0].strip()
        if requirement.replace(" ", "").startswith("torch=="):
            return requirement.replace(" ", "")
    raise SystemExit("requirements.txt pins no torch==VERSION; the CPU build needs an exact pin")


def fingerprint() -> dict:
    """What the environment was built from: the setup files' SHA-256 and this Python."""
    files = {name: hashlib.sha256((ROOT / name).read_bytes()).hexdigest() for name in SETUP_FILES if (ROOT / name).is_file()}
    return {"python": sys.version.split()[0], "files": files}


def up_to_date() -> bool:
    if not env_python().is_file() or not STAMP.is_file():
        return False
    try:
        return json.loads(STAMP.read_text(encoding="utf-8")) == fingerprint()
    except ValueError:
        return False


def pip(*args: str, check: bool = True) -> bool:
    done = subprocess.run([str(env_python()), "-m", "pip", "--disable-pip-version-check", *args], cwd=ROOT)
    if check and done.returncode != 0:
        raise SystemExit(f"pip {' '.join(args)} failed (exit {done.returncode}); see its output above")
    return done.returncode == 0


def set_up() -> None:
    """Create or refresh .venv: the CPU torch first, then requirements.txt, then the package (editable)."""
    print(f"spacy-elmo: setting up {ENV} (once; later runs reuse it)", file=sys.stderr, flush=True)
    STAMP.unlink(missing_ok=True)
    if not env_python().is_file():
        venv.EnvBuilder(with_pip=True).create(ENV)
    pin = torch_pin()
    # torch alone from pip's own sources first, without any index: a local wheel, no network needed
    # (its dependencies come with requirements.txt below, from wherever pip finds packages)
    if not pip("install", "--quiet", "--no-index", "--no-deps", pin, check=False):
        print(f"spacy-elmo: {pin} not found locally; taking the CPU build from {CPU_INDEX}", file=sys.stderr, flush=True)
        pip("install", "--quiet", pin, "--index-url", CPU_INDEX)
    pip("install", "--quiet", "-r", str(ROOT / "requirements.txt"))
    pip("install", "--quiet", "--no-deps", "-e", str(ROOT))
    STAMP.write_text(json.dumps(fingerprint(), indent=1) + "\n", encoding="utf-8")


def record_path(job: str) -> Path:
    return ROOT / RECORDS / f"{job}-run.json"


def start_record() -> Optional[Dict[str, Any]]:
    """``spacy_elmo.records.provenance.start_snapshot()`` from the environment's Python, taken before the job:
    the commit it starts from and whether the tree is clean (None if it cannot be asked)."""
    done = subprocess.run([str(env_python()), "-c", START], cwd=ROOT, capture_output=True, text=True)
    try:
        return json.loads(done.stdout.strip().splitlines()[-1]) if done.returncode == 0 else None
    except (ValueError, IndexError):
        return None


def machine_record(command: str, start: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """``spacy_elmo.records.provenance.provenance(command, ...)`` from the environment's Python (command, start
    commit, model, data, CPU model, flags and count, versions, date); if that fails, what the
    standard library knows."""
    read = [str(ROOT / folder) for folder in MAIN_DATA if (ROOT / folder).is_dir()]
    done = subprocess.run([str(env_python()), "-c", PROVENANCE, command, json.dumps(start), *read],
                          cwd=ROOT, capture_output=True, text=True)
    if done.returncode == 0:
        try:
            return json.loads(done.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            pass
    return {
        "command": command,
        "cpu": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "error": f"spacy_elmo.records.provenance could not be read from {env_python().name}: {done.stderr.strip()[-500:]}",
    }


def record_run(path: Path, argv: Sequence[str], job: List[str], environment: str, set_up_s: float, job_s: float,
               start: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """Write the timing of a finished job to ``path`` (JSON, replaced whole) and return it.

    environment (str): "created" (a new .venv), "refreshed" (an existing one set up again) or "reused".
    set_up_s (float): seconds spent setting it up (0 when reused). job_s (float): the job's wall time.
    start (Optional[Dict[str, Any]]): ``start_record()`` taken before the job.
    """
    command = shlex.join(["python", "scripts/run.py", *argv])
    record = {
        "command": command,
        "job": shlex.join(["python", *job]),
        "environment": environment,
        "set_up_s": round(set_up_s, 1),
        "job_s": round(job_s, 1),
        "total_s": round(set_up_s + job_s, 1),
        "provenance": machine_record(command, start),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".tmp")
    partial.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    os.replace(partial, path)
    return record


def main(argv: Sequence[str]) -> int:
    if not argv or argv[0] not in COMMANDS:
        print("usage: python scripts/run.py {main|tests} [ARGS]", file=sys.stderr)
        return 2
    refusal = python_refusal()
    if refusal is not None:  # before a venv is made or pip asked for a torch this Python cannot have
        print(refusal, file=sys.stderr)
        return 2
    started, environment = time.monotonic(), "reused"
    if not up_to_date():
        environment = "refreshed" if env_python().is_file() else "created"
        set_up()
    set_up_s = time.monotonic() - started if environment != "reused" else 0.0
    job = [*COMMANDS[argv[0]], *argv[1:]]
    start = start_record() if argv[0] in RECORDED else None
    started = time.monotonic()
    returncode = subprocess.run([str(env_python()), *job], cwd=ROOT).returncode
    job_s = time.monotonic() - started
    if argv[0] in RECORDED and returncode == 0:
        path = record_path(argv[0])
        record_run(path, argv, job, environment, set_up_s, job_s, start)
        print(f"spacy-elmo: {argv[0]} took {job_s / 60:.1f} min (set-up {set_up_s / 60:.1f} min, "
              f".venv {environment}); recorded in {path.relative_to(ROOT)}", file=sys.stderr)
    return returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
