"""Package a trained pipeline as a wheel (`spacy package`), install it into a fresh venv and run it on text.

The venv is made with ``--system-site-packages`` so torch, spaCy and spacy-elmo come from the
current environment (nothing is downloaded: pip runs with ``--no-index``); the pipeline itself
comes only from the wheel, and the check fails if it is imported from anywhere else.

    python scripts/package_pipeline.py training/ewt-elmo/model-best packages --name ewt_elmo_tagger \\
        --check "The bank by the river was closed ."
"""
import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Dict, Optional, Sequence

# Runs inside the venv: load the installed package by name and report what it did with the text.
RUN_IN_VENV = """
import json, sys
import spacy
nlp = spacy.load(sys.argv[1])
doc = nlp(sys.argv[2])
print(json.dumps({
    "package_path": str(spacy.util.get_package_path(sys.argv[1])),
    "pipeline": nlp.pipe_names,
    "tokens": [t.text for t in doc],
    "tags": [t.tag_ for t in doc],
    "ents": [[e.text, e.label_] for e in doc.ents],
    "elmo_shape": list(doc._.elmo.layers.shape) if doc.has_extension("elmo") and doc._.elmo is not None else None,
}))
"""


def build_wheel(pipeline: Path, output: Path, *, name: str, version: str) -> Path:
    """``spacy package`` the pipeline and build its wheel. RETURNS (Path): the .whl file."""
    output.mkdir(parents=True, exist_ok=True)
    package = [sys.executable, "-m", "spacy", "package", str(pipeline), str(output), "--name", name]
    _run(package + ["--version", version, "--build", "none", "--force"])
    package_dir = _only(output.glob(f"*_{name}-{version}"), f"package directory for {name}-{version}")
    dist = output / "dist"
    # setuptools builds the wheel without an isolated (downloading) build environment
    pip_wheel = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation"]
    _run(pip_wheel + ["--wheel-dir", str(dist), str(package_dir)])
    return _only(dist.glob(f"{package_dir.name.rsplit('-', 1)[0]}-{version}-*.whl"), "built wheel")


def check_in_fresh_venv(wheel: Path, text: str, *, workdir: Optional[Path] = None) -> Dict[str, Any]:
    """Install the wheel into a new venv and run the pipeline on ``text``.

    RETURNS (Dict[str, Any]): pipeline, tokens, tags, ents, elmo_shape and the package's path.
    """
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        venv = Path(tmp) / "venv"
        _run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)])
        python = venv / "bin" / "python"
        _run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-index", "--quiet", str(wheel)])
        name = wheel.name.split("-")[0]
        out = _run([str(python), "-c", RUN_IN_VENV, name, text], cwd=tmp)
        result = json.loads(out.strip().splitlines()[-1])
        if not Path(result["package_path"]).resolve().is_relative_to(venv.resolve()):
            raise RuntimeError(f"{name} was loaded from {result['package_path']}, not from the fresh venv")
        return result


def _run(command: Sequence[str], cwd: Optional[str] = None) -> str:
    done = subprocess.run(list(command), capture_output=True, text=True, cwd=cwd)
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
