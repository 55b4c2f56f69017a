"""lab/in_checkout.py: the lab project's commands run as `python -m MODULE` from the checkout, whatever
folder spaCy starts them in (lab/project.yml)."""
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LAUNCHER = ROOT / "lab" / "in_checkout.py"


def run(*args, cwd):
    return subprocess.run([sys.executable, str(LAUNCHER), *args], cwd=cwd, capture_output=True, text=True)


def test_a_lab_module_runs_from_the_checkout_and_its_record_says_python_dash_m(tmp_path):
    # started in lab/, as spaCy starts the lab project's commands: the lab (not installed) imports,
    # `results/...` is read from the checkout and the record names the command as run there
    records = tmp_path / "curve.json"
    done = run("lab.campaign.campaign_curve", "results/campaign-wide/pretrain", "--names", "wide",
               "--records", str(records), cwd=ROOT / "lab")
    assert done.returncode == 0, done.stderr
    command = json.loads(records.read_text(encoding="utf-8"))["provenance"]["command"]
    assert command.startswith("python -m lab.campaign.campaign_curve results/campaign-wide/pretrain --names wide")


def test_a_missing_module_or_none_is_a_usage_error_not_a_traceback(tmp_path):
    for args in ([], ["--help"], ["lab.no_such_module"]):
        done = run(*args, cwd=tmp_path)
        assert done.returncode != 0 and "usage: python lab/in_checkout.py MODULE" in done.stderr, args
        assert "Traceback" not in done.stderr
    assert "no module 'lab.no_such_module'" in run("lab.no_such_module", cwd=tmp_path).stderr
