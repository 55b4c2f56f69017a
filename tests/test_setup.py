"""setup.py, the build that makes the platform wheel: where it cannot prebuild the kernels because
the package's own requirements are missing, it stops with one line naming them."""
import runpy
import sys
from pathlib import Path

import pytest
import setuptools
from setuptools import Distribution
from setuptools.command.build_py import build_py

SETUP = Path(__file__).resolve().parents[1] / "setup.py"


def test_a_platform_build_without_the_package_requirements_stops_with_one_line_naming_what_is_missing(monkeypatch):
    monkeypatch.setattr(setuptools, "setup", lambda **kwargs: None)
    monkeypatch.setattr(sys, "argv", [str(SETUP), "bdist_wheel"])
    build = runpy.run_path(str(SETUP))["build_with_kernels"]
    module = build.run.__globals__
    assert module["missing_requirements"]() == []  # this environment holds them all
    monkeypatch.setitem(sys.modules, "numpy", None)  # as if numpy were not installed
    monkeypatch.setitem(module, "PREBUILDING", True)
    monkeypatch.setattr(build_py, "run", lambda self: None)  # the files copied: nothing to copy here
    with pytest.raises(SystemExit, match=r"missing: numpy\)") as stopped:
        build(Distribution()).run()
    assert "\n" not in str(stopped.value) and "SPACY_ELMO_PREBUILT=0" in str(stopped.value)
