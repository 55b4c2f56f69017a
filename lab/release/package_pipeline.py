"""Package a trained pipeline as a wheel (`spacy package`), install it into a fresh venv and run it on text.

The check installs what a user installs: spacy-elmo's own wheel, built from this checkout (the
platform wheel, its kernels prebuilt), and the pipeline's wheel, both with ``pip install --no-index
--no-deps`` into a new venv, and runs them as a user without a C++ compiler on a fresh cache
(``without_compiler``): the result names the kernels that ran (``kernels``). The venv sees
the packages of the environment that runs this script (spaCy, torch and the rest, through a
``.pth`` file listing that environment's site-packages) and nothing else: not the base
interpreter's packages, not the checkout. Nothing is downloaded. The check fails if the
pipeline or spacy_elmo is imported from anywhere but the fresh venv, or if a requirement of
either wheel is not met there.

    python -m lab.release.package_pipeline training/ewt-elmo/model-best packages --name ewt_elmo_tagger \\
        --check "The bank by the river was closed ."
"""
import argparse
import atexit
import hashlib
import json
import os
import shutil
import site
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from lab import CHECKOUT

REPO = CHECKOUT
# what building spacy-elmo's wheel reads from the checkout (setup.cfg: version, package data, README)
SOURCE_FILES = ["setup.cfg", "setup.py", "pyproject.toml", "README.md"]
PTH_NAME = "parent-environment.pth"
# wheels built in this process, by the digest of what they were built from: the platform wheel
# compiles every kernel variant (a minute or more on two cores), so a test session builds it once
_BUILT: Dict[str, Path] = {}

# Runs inside the venv: load the installed package by name and report what it did with the text.
RUN_IN_VENV = """
import json, sys
from importlib import metadata
from packaging.requirements import Requirement
import spacy, spacy_elmo
from spacy_elmo.fast import kernel_library

def unmet(dist):
    missing = []
    for line in metadata.requires(dist) or []:
        req = Requirement(line)
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        try:
            found = metadata.version(req.name)
        except metadata.PackageNotFoundError:
            found = None
        if found is None or not req.specifier.contains(found, prereleases=True):
            missing.append(f"{dist}: {line} (found {found})")
    return missing

nlp = spacy.load(sys.argv[1])
doc = nlp(sys.argv[2])
print(json.dumps({
    "package_path": str(spacy.util.get_package_path(sys.argv[1])),
    "spacy_elmo_path": spacy_elmo.__file__,
    "spacy_elmo_version": metadata.version("spacy-elmo"),
    "unmet_requirements": unmet(sys.argv[1]) + unmet("spacy-elmo"),
    "pipeline": nlp.pipe_names,
    "tokens": [t.text for t in doc],
    "tags": [t.tag_ for t in doc],
    "ents": [[e.text, e.label_] for e in doc.ents],
    "cats": doc.cats,
    "elmo_shape": list(doc._.elmo.layers.shape) if doc.has_extension("elmo") and doc._.elmo is not None else None,
    "kernels": {key: kernel_library.status()[key] for key in ("variant", "source", "loaded", "compiler")},
}))
"""

# Runs in a new process: what a new user's first lines cost (import, add_pipe with the shipped
# biLM, the first doc), which timestep loop each pass of the first doc took, and the kernels.
FIRST_DOC = """
import json, sys, time
began = time.perf_counter()
import spacy, spacy_elmo
from spacy_elmo.fast import dispatch, kernel_library
imported = time.perf_counter()
paths = []
choose = dispatch.Runner.stack_path
def recorded(self, *args):
    paths.append(choose(self, *args))
    return paths[-1]
dispatch.Runner.stack_path = recorded
nlp = spacy.blank("en")
nlp.add_pipe("elmo")
added = time.perf_counter()
doc = nlp(sys.argv[1])
done = time.perf_counter()
print(json.dumps({"import_s": imported - began, "add_pipe_s": added - imported, "first_doc_s": done - added,
                  "to_first_doc_s": done - began, "paths": paths, "tokens": len(doc),
                  "spacy_elmo_path": spacy_elmo.__file__, "kernels": kernel_library.status()}))
"""
FIRST_TEXT = "I deposited cash at the bank."


def first_doc(python: Path, environ: Dict[str, str], text: str = FIRST_TEXT, cwd: Optional[Path] = None) -> Dict[str, Any]:
    """Run ``FIRST_DOC`` with ``python`` in ``environ``: a new process's first doc.

    RETURNS (Dict[str, Any]): the seconds to import, to add the pipe, for the first doc and all
        three (``to_first_doc_s``), the run paths of its passes (``dispatch.Runner.stack_path``:
        "compiled" for the C++ loop), and ``kernel_library.status()`` after it.
    """
    out = _run([str(python), "-c", FIRST_DOC, text], cwd=str(cwd) if cwd else None, env=environ)
    return json.loads(out.strip().splitlines()[-1])


def build_wheel(pipeline: Path, output: Path, *, name: str, version: str) -> Path:
    """``spacy package`` the pipeline and build its wheel. RETURNS (Path): the .whl file."""
    output.mkdir(parents=True, exist_ok=True)
    package = [sys.executable, "-m", "spacy", "package", str(pipeline), str(output), "--name", name]
    _run(package + ["--version", version, "--build", "none", "--force"])
    package_dir = _only(output.glob(f"*_{name}-{version}"), f"package directory for {name}-{version}")
    dist = output / "dist"
    # setuptools builds the wheel without an isolated (downloading) build environment
    _run(_pip_wheel(dist, package_dir))
    return _only(dist.glob(f"{package_dir.name.rsplit('-', 1)[0]}-{version}-*.whl"), "built wheel")


def build_spacy_elmo_wheel(dist: Path, *, source: Path = REPO) -> Path:
    """spacy-elmo's wheel from the checkout at ``source``, built from a copy (the checkout gets no
    build/ or egg-info): the platform wheel with its kernels prebuilt, as this environment has
    torch (setup.py). Built once per process for the same files; later calls copy it into ``dist``.
    RETURNS (Path): the .whl file."""
    dist.mkdir(parents=True, exist_ok=True)
    for old in dist.glob("spacy_elmo-*.whl"):
        old.unlink()
    key = _source_digest(source)
    if key not in _BUILT or not _BUILT[key].is_file():
        keep = Path(tempfile.mkdtemp(prefix="spacy-elmo-wheel-"))
        atexit.register(shutil.rmtree, keep, True)
        _BUILT[key] = _build_spacy_elmo_wheel(keep, source)
    return Path(shutil.copy2(_BUILT[key], dist / _BUILT[key].name))


def _source_digest(source: Path) -> str:
    """RETURNS (str): the SHA-256 of every file a wheel of ``source`` is built from, names included."""
    digest = hashlib.sha256()
    files = [source / n for n in SOURCE_FILES if (source / n).is_file()]
    files += sorted(p for p in (source / "spacy_elmo").rglob("*")
                    if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
                    and "prebuilt" not in p.relative_to(source).parts)
    for path in files:
        digest.update(str(path.relative_to(source)).encode("utf-8") + b"\0" + path.read_bytes())
    return digest.hexdigest()


def _build_spacy_elmo_wheel(dist: Path, source: Path) -> Path:
    with tempfile.TemporaryDirectory() as tmp:
        copy = _source_copy(Path(tmp), source)
        for old in dist.glob("spacy_elmo-*.whl"):
            old.unlink()
        _run(_pip_wheel(dist, copy))
    return _only(dist.glob("spacy_elmo-*.whl"), "spacy-elmo wheel")


def build_spacy_elmo_sdist(dist: Path, *, source: Path = REPO) -> Path:
    """spacy-elmo's source distribution from a copy of the checkout at ``source`` (setuptools'
    PEP 517 hook, in this environment). RETURNS (Path): the .tar.gz file."""
    dist.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        copy = _source_copy(Path(tmp), source)
        hook = "import sys; from setuptools import build_meta; print(build_meta.build_sdist(sys.argv[1]))"
        name = _run([sys.executable, "-c", hook, str(dist.resolve())], cwd=str(copy)).strip().splitlines()[-1]
    return dist / name


def _source_copy(folder: Path, source: Path) -> Path:
    """What a build of ``source`` reads (its setup files, README, the package), copied under ``folder``."""
    copy = folder / "spacy-elmo"
    copy.mkdir()
    for name in SOURCE_FILES:
        if (source / name).is_file():
            shutil.copy2(source / name, copy / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "prebuilt")
    shutil.copytree(source / "spacy_elmo", copy / "spacy_elmo", ignore=ignore)
    return copy


def environment_paths() -> List[str]:
    """The running environment's package directories (its site-packages, as on ``sys.path``)."""
    sites = {str(Path(p).resolve()) for p in site.getsitepackages()}
    if site.ENABLE_USER_SITE:
        sites.add(str(Path(site.getusersitepackages()).resolve()))
    found: List[str] = []
    for entry in sys.path:
        path = Path(entry or ".").resolve()
        is_site = str(path) in sites or path.name in ("site-packages", "dist-packages")
        if is_site and path.is_dir() and path != REPO and str(path) not in found:
            found.append(str(path))
    return found


def check_in_fresh_venv(
    wheel: Path, text: str, *, workdir: Optional[Path] = None, spacy_elmo_wheel: Optional[Path] = None
) -> Dict[str, Any]:
    """Install spacy-elmo's wheel and the pipeline's wheel into a new venv and run the pipeline on ``text``.

    spacy_elmo_wheel (Optional[Path]): spacy-elmo's wheel; built from the checkout when None.
    RETURNS (Dict[str, Any]): pipeline, tokens, tags, ents, cats, elmo_shape, where the packages came from
        and the kernels that ran (variant, source: "prebuilt" or "built here", loaded, compiler).
    """
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        if spacy_elmo_wheel is None:
            spacy_elmo_wheel = build_spacy_elmo_wheel(Path(tmp) / "dist")
        venv = Path(tmp) / "venv"
        python = fresh_venv(venv, [spacy_elmo_wheel, wheel])
        name = wheel.name.split("-")[0]
        out = _run([str(python), "-c", RUN_IN_VENV, name, text], cwd=tmp, env=without_compiler(python, Path(tmp) / "cache"))
        result = json.loads(out.strip().splitlines()[-1])
        for key, what in (("package_path", name), ("spacy_elmo_path", "spacy_elmo")):
            if not Path(result[key]).resolve().is_relative_to(venv.resolve()):
                raise RuntimeError(f"{what} was loaded from {result[key]}, not from the fresh venv")
        if result["unmet_requirements"]:
            raise RuntimeError(f"requirements not met in the fresh venv: {result['unmet_requirements']}")
        # paths in the temporary venv mean nothing once it is gone
        for key in ("package_path", "spacy_elmo_path"):
            result[key] = str(Path(result[key]).resolve().relative_to(venv.resolve()))
        return result


def fresh_venv(venv: Path, wheels: Sequence[Path]) -> Path:
    """A new venv at ``venv`` holding ``wheels`` and seeing this environment's packages (spaCy,
    torch, ...) through a .pth file of plain directories: not the base interpreter's, not the
    checkout, not an editable install. RETURNS (Path): its Python."""
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    python = venv / "bin" / "python"
    # installed while the venv sees nothing else, so pip cannot take an installed copy for them
    install = [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-index", "--no-deps"]
    _run(install + ["--quiet", *map(str, wheels)])
    site_packages = _run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"]).strip()
    # plain directory lines: the parent's own .pth files (an editable spacy-elmo) are not run
    (Path(site_packages) / PTH_NAME).write_text("".join(p + "\n" for p in environment_paths()), encoding="utf-8")
    return python


def without_compiler(python: Path, cache: Path) -> Dict[str, str]:
    """The environment of a user who has no C++ compiler and has run nothing yet: ``PATH`` holds
    only the venv's bin/ (no c++, g++ or clang++), no ``CC``/``CXX``, and an empty cache folder
    (``SPACY_ELMO_CACHE``, ``XDG_CACHE_HOME``). RETURNS (Dict[str, str]): the variables."""
    cache.mkdir(parents=True, exist_ok=True)
    kept = {k: v for k, v in os.environ.items()
            if k not in ("CC", "CXX", "PYTHONPATH", "SPACY_ELMO_KERNELS", "SPACY_ELMO_CACHE", "XDG_CACHE_HOME")}
    return {**kept, "PATH": str(python.parent), "SPACY_ELMO_CACHE": str(cache), "XDG_CACHE_HOME": str(cache)}


def _pip_wheel(dist: Path, source: Path) -> List[str]:
    return [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--quiet",
            "--wheel-dir", str(dist), str(source)]


def _run(command: Sequence[str], cwd: Optional[str] = None, env: Optional[Dict[str, str]] = None) -> str:
    done = subprocess.run(list(command), capture_output=True, text=True, cwd=cwd, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    return done.stdout


def _only(paths, what: str) -> Path:
    found = list(paths)
    if len(found) != 1:
        raise RuntimeError(f"expected one {what}, found {[str(p) for p in found]}")
    return found[0]


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pipeline", type=Path, help="a trained pipeline directory (e.g. model-best)")
    parser.add_argument("output", type=Path, help="where the package directory and dist/*.whl go")
    parser.add_argument("--name", required=True, help="package name (spaCy prefixes the language: en_NAME)")
    parser.add_argument("--version", default="0.0.1")
    parser.add_argument("--check", metavar="TEXT", help="install the wheel into a fresh venv and run it on TEXT")
    args = parser.parse_args(argv)
    wheel = build_wheel(args.pipeline, args.output, name=args.name, version=args.version)
    print(f"wheel: {wheel}")
    if args.check:
        result = check_in_fresh_venv(wheel, args.check)
        print(json.dumps(result, indent=1))
        (args.output / "check.json").write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
