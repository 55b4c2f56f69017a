"""spacy-elmo's build: setup.cfg holds the metadata; this file makes the platform wheel.

A wheel built where torch can be imported (``pip wheel --no-build-isolation .``, ``python -m build
--no-isolation``, the way this checkout builds its wheels) carries every kernel variant prebuilt
(``spacy_elmo/fast/prebuilt/``: ``python -m spacy_elmo.fast.kernel_build --prebuilt``, with their
build records) against that torch, and so requires exactly that torch release and is tagged
``py3-none-<platform>`` (the kernels link libtorch, not Python). The source distribution, an
editable install, a wheel built in an isolated environment without torch, or any build with
``SPACY_ELMO_PREBUILT=0``, or without a C++ compiler, stays pure Python: it requires the torch range setup.cfg states (the
releases the tests run on) and compiles the kernels at first use. ``SPACY_ELMO_PREBUILT=1`` makes a
wheel that cannot be prebuilt an error rather than a pure wheel.
"""
import configparser
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import Distribution, setup
from setuptools.command.bdist_wheel import bdist_wheel
from setuptools.command.build_py import build_py

ENV = "SPACY_ELMO_PREBUILT"
ROOT = Path(__file__).resolve().parent
# the commands that make no wheel to install as it is: the source distribution, an editable install
PURE_COMMANDS = {"sdist", "editable_wheel", "develop", "egg_info"}


def _torch_release():
    """RETURNS: the importable torch's release (X.Y.Z, without a local label such as +cpu), or None."""
    try:
        import torch
    except ImportError:
        return None
    return torch.__version__.split("+")[0]


def _prebuilding() -> bool:
    """Whether this build makes the platform wheel (see the module docstring)."""
    asked = os.environ.get(ENV, "").strip()
    if asked == "0" or PURE_COMMANDS & set(sys.argv[1:]):
        return False
    if _torch_release() is None:
        if asked == "1":
            raise SystemExit(f"{ENV}=1, but torch cannot be imported where this wheel is built: build it with "
                             "`pip wheel --no-build-isolation .` in an environment holding the pinned torch")
        return False
    # the compilers kernel_build.compiler() looks for, in its order
    if not any(name and shutil.which(name) for name in (os.environ.get("CXX"), "c++", "g++", "clang++")):
        if asked == "1":
            raise SystemExit(f"{ENV}=1, but no C++ compiler is found ($CXX, c++, g++, clang++) to prebuild the kernels")
        return False
    return sys.platform.startswith("linux") or sys.platform == "darwin"


PREBUILDING = _prebuilding()


class build_with_kernels(build_py):
    """``build_py``, then the kernel variants compiled into the wheel's ``spacy_elmo/fast/prebuilt``."""

    def run(self) -> None:
        super().run()
        if not PREBUILDING or getattr(self, "editable_mode", False):
            return
        missing = missing_requirements()
        if missing:
            # kernel_build runs as ``spacy_elmo.fast.kernel_build``, so the package and what it imports
            # must load here; without them the build would end in a long traceback from that import
            raise SystemExit(f"spacy-elmo: prebuilding the kernels imports spacy_elmo, whose requirements are not "
                             f"installed where this wheel is built (missing: {', '.join(missing)}): install them "
                             f"(pip install -r requirements.txt) beside the pinned torch, or build the pure wheel "
                             f"with {ENV}=0")
        build_lib = Path(self.build_lib).resolve()
        folder = build_lib / "spacy_elmo" / "fast" / "prebuilt"
        print(f"spacy-elmo: prebuilding the kernel variants into {folder} for torch {_torch_release()}", flush=True)
        # the copy being packaged, imported from build_lib, builds them: its sources are the ones recorded
        environ = {**os.environ, "PYTHONPATH": os.pathsep.join([str(build_lib), os.environ.get("PYTHONPATH", "")])}
        subprocess.run([sys.executable, "-m", "spacy_elmo.fast.kernel_build", "--prebuilt", str(folder)],
                       cwd=build_lib, env=environ, check=True)


class WithKernels(Distribution):
    """A distribution whose wheel holds the prebuilt kernels: built into the platform's folder and
    installed there (platlib), as a wheel of compiled extensions is."""

    def has_ext_modules(self) -> bool:
        return PREBUILDING


class platform_wheel(bdist_wheel):
    """A wheel that holds the prebuilt kernels is for one platform and any Python 3."""

    def get_tag(self):
        python, abi, platform = super().get_tag()
        return ("py3", "none", platform) if PREBUILDING else (python, abi, platform)


def listed_requirements():
    """RETURNS: setup.cfg's install_requires, one requirement a line."""
    parser = configparser.ConfigParser()
    parser.read(ROOT / "setup.cfg", encoding="utf-8")
    return [line.strip() for line in parser.get("options", "install_requires").splitlines() if line.strip()]


def missing_requirements(find=importlib.util.find_spec):
    """RETURNS: the requirements (by their import names) that ``find`` does not find in this
    environment; the prebuild imports spacy_elmo, and so all of them."""
    names = (re.match(r"[A-Za-z0-9_.-]+", line).group(0) for line in listed_requirements())
    return [name for name in (n.replace("-", "_") for n in names) if find(name) is None]


def install_requires():
    """setup.cfg's requirements; the platform wheel's torch is the release its kernels were built against."""
    listed = listed_requirements()
    if not PREBUILDING:
        return listed
    return [f"torch=={_torch_release()}" if line.replace(" ", "").startswith("torch") else line for line in listed]


setup(install_requires=install_requires(), distclass=WithKernels,
      cmdclass={"build_py": build_with_kernels, "bdist_wheel": platform_wheel})
