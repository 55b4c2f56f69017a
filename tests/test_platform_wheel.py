"""The platform wheel as a user installs it: built from the checkout once (its kernel variants
compiled at build time), installed into a fresh venv offline, and run where no compiler can be
reached, on a fresh cache: the prebuilt variant runs from the first doc, nothing is compiled. Its
tag and metadata say what it is, and pip itself refuses it to Python 3.9."""
import json
import platform
import subprocess
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest
import torch

import spacy_elmo
from spacy_elmo.fast import kernel_build, kernel_library, kernel_variants
from spacy_elmo.files import file_sha256

from lab.release.package_pipeline import (
    build_spacy_elmo_sdist, build_spacy_elmo_wheel, first_doc, fresh_venv, without_compiler,
)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not sys.platform.startswith("linux") or kernel_build.compiler() is None,
                       reason="the platform wheel is built on Linux with a C++ compiler"),
]
TORCH_RELEASE = torch.__version__.split("+")[0]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    return build_spacy_elmo_wheel(tmp_path_factory.mktemp("dist"))


@pytest.fixture(scope="module")
def venv_python(wheel, tmp_path_factory) -> Path:
    return fresh_venv(tmp_path_factory.mktemp("fresh") / "venv", [wheel])


def _dist_info(wheel: Path, name: str) -> str:
    with zipfile.ZipFile(wheel) as archive:
        return archive.read(f"spacy_elmo-{spacy_elmo.__version__}.dist-info/{name}").decode("utf-8")


def test_the_wheel_is_tagged_for_its_platform_and_requires_the_torch_and_python_its_kernels_were_built_for(wheel):
    tags = [line.split(": ", 1)[1] for line in _dist_info(wheel, "WHEEL").splitlines() if line.startswith("Tag: ")]
    assert tags == [f"py3-none-linux_{platform.machine()}"]
    assert wheel.name.endswith(f"-py3-none-linux_{platform.machine()}.whl")
    metadata = Parser().parsestr(_dist_info(wheel, "METADATA"))
    assert metadata["Requires-Python"] == ">=3.10"
    assert f"torch=={TORCH_RELEASE}" in metadata.get_all("Requires-Dist")


def test_the_wheel_carries_every_variant_with_the_record_it_is_checked_against(wheel, tmp_path):
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(tmp_path, [n for n in archive.namelist() if "/prebuilt/" in n])
    folder = tmp_path / "spacy_elmo" / "fast" / "prebuilt"
    libraries = sorted(folder.glob("*.so"))
    assert sorted(kernel_library.variant_of(p) for p in libraries) == sorted(v.name for v in kernel_variants.variants())
    assert {p.name for p in folder.iterdir()} == {n for p in libraries for n in (p.name, p.with_suffix(".json").name)}
    for library in libraries:
        record = json.loads(library.with_suffix(".json").read_text(encoding="utf-8"))
        assert record["library_sha256"] == file_sha256(library) and record["torch"] == torch.__version__
        assert record["sources"] == kernel_build.source_hashes()


def test_pip_refuses_the_wheel_to_python_3_9_with_its_own_message(wheel, tmp_path):
    ask = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-index", "--only-binary=:all:",
           "--find-links", str(wheel.parent), "--dest", str(tmp_path), "spacy-elmo"]
    refused = subprocess.run([*ask, "--python-version", "3.9"], capture_output=True, text=True)
    assert refused.returncode != 0
    assert "ERROR: Package 'spacy-elmo' requires a different Python: 3.9.0 not in '>=3.10'" in refused.stderr
    taken = subprocess.run([*ask, "--python-version", "3.10"], capture_output=True, text=True)
    assert taken.returncode == 0, taken.stderr


def test_with_no_compiler_reachable_kernels_says_the_prebuilt_variant_for_this_cpu_runs(venv_python, tmp_path):
    environ = without_compiler(venv_python, tmp_path / "cache")
    done = subprocess.run([str(venv_python), "-m", "spacy_elmo", "kernels"], capture_output=True, text=True,
                          env=environ, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    state = json.loads(done.stdout[done.stdout.index("{"):])
    assert state["compiler"] is None and state["variant"] == kernel_variants.chosen().name
    assert state["variants"][state["variant"]] == "runs"
    assert state["source"] == "prebuilt" and state["verified"] and state["refused"] is None
    assert Path(state["library"]).is_relative_to(venv_python.parent.parent)


def test_the_first_doc_of_a_new_process_runs_the_compiled_loop_and_compiles_nothing(venv_python, tmp_path):
    cache = tmp_path / "cache"
    result = first_doc(venv_python, without_compiler(venv_python, cache), cwd=tmp_path)
    assert Path(result["spacy_elmo_path"]).is_relative_to(venv_python.parent.parent)  # the wheel's copy
    assert result["paths"] and set(result["paths"]) == {"compiled"}
    kernels = result["kernels"]
    assert kernels["loaded"] and kernels["source"] == "prebuilt" and kernels["compiler"] is None
    assert not (cache / "kernels").exists() or not list((cache / "kernels").glob("*.so"))  # nothing compiled


def test_the_source_distribution_requires_the_tested_torch_range_and_carries_sources_not_kernels(tmp_path):
    import tarfile

    sdist = build_spacy_elmo_sdist(tmp_path)
    with tarfile.open(sdist) as archive:
        names = archive.getnames()
        metadata = Parser().parsestr(archive.extractfile(f"spacy_elmo-{spacy_elmo.__version__}/PKG-INFO").read().decode())
    assert "torch<2.14,>=2.13.0" in metadata.get_all("Requires-Dist") and metadata["Requires-Python"] == ">=3.10"
    assert any(n.endswith("fast/csrc/lstmp_steps.cpp") for n in names) and not any("prebuilt" in n for n in names)
