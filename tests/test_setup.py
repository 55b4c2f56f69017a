"""setup.py, the build that makes the platform wheel: where it cannot prebuild the kernels because
the package's own requirements are missing, it stops with one line naming them.

The check runs in a fresh interpreter: setuptools must be imported before anything imports the
standard library's distutils, which other test modules' imports (pyspark, ray) may already have
done in the test process."""
import json
import subprocess
import sys
from pathlib import Path

SETUP = Path(__file__).resolve().parents[1] / "setup.py"

CHECK = """
import json, runpy, sys
import setuptools
from setuptools import Distribution
from setuptools.command.build_py import build_py

setup_py = sys.argv[1]
setuptools.setup = lambda **kwargs: None
sys.argv = [setup_py, "bdist_wheel"]
build = runpy.run_path(setup_py)["build_with_kernels"]
module = build.run.__globals__
found = module["missing_requirements"]()
sys.modules["numpy"] = None  # as if numpy were not installed
module["PREBUILDING"] = True
build_py.run = lambda self: None  # the files copied: nothing to copy here
try:
    build(Distribution()).run()
    stopped = None
except SystemExit as error:
    stopped = str(error)
print(json.dumps({"missing_before": found, "stopped": stopped}))
"""


def test_a_platform_build_without_the_package_requirements_stops_with_one_line_naming_what_is_missing():
    done = subprocess.run([sys.executable, "-c", CHECK, str(SETUP)], capture_output=True, text=True, timeout=300,
                          cwd=SETUP.parent)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["missing_before"] == []  # this environment holds them all
    stopped = result["stopped"]
    assert stopped is not None and "missing: numpy)" in stopped
    assert "\n" not in stopped and "SPACY_ELMO_PREBUILT=0" in stopped
