"""The kernel library: a clear fallback where it cannot be built or loaded, built once per
machine, and no library loaded that anyone else could have put in place."""
import json
import os
from pathlib import Path
import shutil
import subprocess
import sys
import warnings

import pytest
import torch

from spacy_elmo.fast import compiled, kernel_build, kernel_library
from spacy_elmo.fast import optimize_for_inference
from spacy_elmo.files import file_sha256

from ..conftest import random_bilm
from ..bilm.sentences import layers


def test_a_failed_build_warns_once_falls_back_and_is_not_retried(monkeypatch, broken_compiler, capsys):
    monkeypatch.setattr(kernel_library, "_STATE", {"ops": {}, "errors": {}})
    with pytest.warns(RuntimeWarning, match="compiled LSTM step is not available"):
        assert compiled.compiled_step() is None
    said = capsys.readouterr().err  # the first use says what it does, and how to avoid the wait
    variant = kernel_library.chosen_variant().name
    assert f"compiling the LSTM step for this CPU ({variant}) into {kernel_library.kernel_dir()}" in said
    assert "kernels --build" in said and "SPACY_ELMO_COMPILED=0" in said
    assert kernel_library.kernel_dir().stat().st_mode & 0o777 == 0o700
    failed = kernel_library.library_path().with_suffix(".failed")
    assert broken_compiler in failed.read_text(encoding="utf-8")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert compiled.compiled_step() is None  # remembered: no second warning
        # the model still runs, on the Python loop, with the plain model's results
        bilm = random_bilm(seed=5)
        expected = layers(bilm).layers
        torch.testing.assert_close(layers(optimize_for_inference(bilm)).layers, expected, atol=1e-5, rtol=0)
    with pytest.raises(kernel_library.KernelBuildError, match="earlier build failed"):
        kernel_library.load()  # a new process would not retry either
    assert kernel_library.status()["failed"] is not None


def load_in_a_fresh_process(folder, marker=None):
    """compiled_step(build=False) in a new process (this one may have loaded a library already):
    whether it gave the op, the error it kept, and the warnings it printed."""
    env = dict(os.environ, SPACY_ELMO_KERNELS=str(folder), MARKER=str(marker or folder / "no-marker"))
    code = (
        "import json, warnings; from spacy_elmo.fast import compiled as c, kernel_library as k;"
        "warnings.simplefilter('always'); op = c.compiled_step(build=False); print(json.dumps([op is not None, k._STATE['errors'].get('')]))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    loaded, error = json.loads(done.stdout)
    return loaded, error, done.stderr


@pytest.fixture(scope="module")
def built_library():
    """The library built (once) in the tests' shared kernel folder, with its record."""
    if kernel_library.compiler() is None:
        pytest.skip("no C++ compiler here")
    kernel_library.build_variants([kernel_library.chosen_variant()])
    return kernel_library.library_path()


@pytest.fixture()
def kernels(tmp_path, monkeypatch, built_library):
    """A private kernel folder under tmp_path holding a copy of the built library and its record."""
    folder = tmp_path / "kernels"
    folder.mkdir(mode=0o700)
    for path in (built_library, kernel_library.record_path(built_library)):
        shutil.copy2(path, folder / path.name)
    monkeypatch.setenv(kernel_library.DIR_ENV, str(folder))
    return folder / built_library.name


def marker_library(tmp_path):
    """A library that creates the file $MARKER as it is loaded: what a swapped kernel could do."""
    source = tmp_path / "marker.cpp"
    source.write_text(
        '#include <cstdio>\n#include <cstdlib>\n'
        '__attribute__((constructor)) static void mark() { std::fclose(std::fopen(std::getenv("MARKER"), "w")); }\n',
        encoding="utf-8",
    )
    library = tmp_path / "marker.so"
    subprocess.run([kernel_library.compiler(), "-shared", "-fPIC", str(source), "-o", str(library)], check=True, timeout=120)
    return library


def test_a_verified_library_loads_in_a_fresh_process(kernels):
    assert kernel_library.refusal(kernels) is None
    loaded, error, stderr = load_in_a_fresh_process(kernels.parent)
    assert loaded and error is None and "RuntimeWarning" not in stderr
    record = json.loads(kernel_library.record_path(kernels).read_text(encoding="utf-8"))
    assert record["library_sha256"] == file_sha256(kernels)
    assert record["sources"] == kernel_build.source_hashes() and record["torch"] == torch.__version__
    assert record["variant"] == kernel_library.chosen_variant().name
    assert record["compiler"] and record["compiler_version"] and record["built"]


def test_a_swapped_library_is_refused_with_a_warning_and_never_loaded(kernels, tmp_path):
    swapped = marker_library(tmp_path)
    marker = tmp_path / "ran"
    code = "import ctypes, sys; ctypes.CDLL(sys.argv[1])"  # the swap would run code, were it loaded
    subprocess.run([sys.executable, "-c", code, str(swapped)], check=True, env=dict(os.environ, MARKER=str(marker)))
    assert marker.exists()
    marker.unlink()
    shutil.copyfile(swapped, kernels)
    loaded, error, stderr = load_in_a_fresh_process(kernels.parent, marker)
    assert not loaded and not marker.exists()
    assert error.startswith(f"refused {kernels}: its SHA-256") and "kernels --build --force" in error
    assert "RuntimeWarning" in stderr and "running the Python step" in stderr
    assert kernels.exists()  # not deleted: the user decides, after a look, what to do with it
    assert kernel_library.status()["verified"] is False and "SHA-256" in kernel_library.status()["refused"]


def test_a_record_of_other_sources_is_refused(kernels):
    record = kernel_library.record_path(kernels)
    built = json.loads(record.read_text(encoding="utf-8"))
    built["sources"]["cell_math.cpp"] = "0" * 64
    record.write_text(json.dumps(built), encoding="utf-8")
    loaded, error, _ = load_in_a_fresh_process(kernels.parent)
    assert not loaded and "names other sources than the installed ones" in error


def test_a_damaged_library_without_a_record_is_refused_and_kept(kernels):
    kernels.write_bytes(b"not a library")
    kernel_library.record_path(kernels).unlink()
    loaded, error, stderr = load_in_a_fresh_process(kernels.parent)
    assert not loaded and "there is no build record" in error and "running the Python step" in stderr
    assert kernels.read_bytes() == b"not a library"


def test_a_library_without_a_record_is_built_again_where_building_is_allowed(kernels, monkeypatch):
    kernel_library.record_path(kernels).unlink()
    calls = []

    def build(variants, *, force=False):
        calls.append(([kernel_library.library_path(v) for v in variants], force))
        raise kernel_library.KernelBuildError("not built in this test")

    monkeypatch.setattr(kernel_library, "_build", build)
    with pytest.raises(kernel_library.KernelBuildError, match="not built in this test"):
        kernel_library.load(build=True)
    assert calls == [([kernels], True)]


def test_a_folder_others_may_write_to_is_refused_for_loading_and_building(kernels):
    kernels.parent.chmod(0o770)
    loaded, error, _ = load_in_a_fresh_process(kernels.parent)
    assert not loaded and f"{kernels.parent} may be written by others (mode 770)" in error
    assert f"chmod go-w {kernels.parent}" in error
    with pytest.raises(kernel_library.KernelBuildError, match="not building into"):
        kernel_library._build([kernel_library.chosen_variant()], force=True)
    kernels.parent.chmod(0o700)
    kernel_library.record_path(kernels).chmod(0o666)
    assert "may be written by others (mode 666)" in kernel_library.refusal(kernels)


@pytest.mark.skipif(not hasattr(os, "getuid") or os.getuid() != 0, reason="changing a file's owner needs root")
def test_a_library_owned_by_another_user_is_refused(kernels):
    os.chown(kernels, 65534, 65534)
    loaded, error, _ = load_in_a_fresh_process(kernels.parent)
    assert not loaded and f"{kernels} belongs to another user (uid 65534)" in error


def test_an_unwritable_kernel_folder_is_a_build_error_not_a_crash(monkeypatch, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder", encoding="utf-8")
    monkeypatch.setenv(kernel_library.DIR_ENV, str(blocker / "kernels"))  # a folder inside a file
    monkeypatch.setattr(kernel_library, "compiler", lambda: "/bin/true")
    with pytest.raises(kernel_library.KernelBuildError, match="could not build into"):
        kernel_library._build([kernel_library.chosen_variant()])


def test_build_commands_need_no_setuptools_and_name_torchs_own_paths(tmp_path):
    """The build commands come without importing setuptools (torch.utils.cpp_extension does, and
    setuptools' distutils shim can raise an AssertionError in a process that imported the standard
    library's distutils first): here setuptools cannot be imported at all."""
    script = (
        "import json, sys; sys.modules['setuptools'] = None\n"
        "from pathlib import Path\n"
        "from spacy_elmo.fast import kernel_build as b, kernel_variants as v\n"
        "work = Path(sys.argv[1])\n"
        "commands = [b.compile_command('c++', b.GLUE, b.glue_flags(), work / 'glue.o')]\n"
        "commands += b.build_commands('c++', work / 'v', work / 'x.so', v.variants()[-1], work / 'glue.o')\n"
        "print(json.dumps(commands))\n"
    )
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    commands_json = done.stdout.strip().splitlines()[-1]
    # torch's own lists, from a fresh process (where this one imported distutils, setuptools may raise)
    listed = subprocess.run(
        [sys.executable, "-c", "import json; from torch.utils import cpp_extension as c; "
         "print(json.dumps([c.include_paths(), c.library_paths()]))"],
        capture_output=True, text=True, timeout=300,
    )
    assert listed.returncode == 0, listed.stderr[-2000:]
    include_paths, library_paths = json.loads(listed.stdout.strip().splitlines()[-1])
    flags = {flag for command in json.loads(commands_json) for flag in command}
    resolved = {str(Path(p[2:]).resolve()) for p in flags if p.startswith("-I")}
    assert {str(Path(p).resolve()) for p in include_paths} <= resolved
    assert {f"-L{Path(p).resolve()}" for p in library_paths} <= {f"-L{Path(p[2:]).resolve()}" for p in flags if p.startswith("-L")}


def run_with_prebuilt(prebuilt, kernels, code, **env):
    """``code`` in a new process whose package carries ``prebuilt`` as its wheel's prebuilt folder,
    with ``kernels`` as its (empty) kernel folder and a compiler that fails: whatever loads was not
    compiled here. RETURNS (subprocess.CompletedProcess)."""
    script = ("import sys, json, warnings; from pathlib import Path; warnings.simplefilter('always');"
              "from spacy_elmo.fast import kernel_library as k, compiled as c; k.PREBUILT_DIR = Path(sys.argv[1]);" + code)
    environ = dict(os.environ, SPACY_ELMO_KERNELS=str(kernels), **env)
    return subprocess.run([sys.executable, "-c", script, str(prebuilt)], capture_output=True, text=True, env=environ,
                          timeout=300)


@pytest.fixture()
def prebuilt(tmp_path, built_library, broken_compiler):
    """A wheel's prebuilt folder holding the built library and its record; builds would fail."""
    folder = tmp_path / "prebuilt"
    folder.mkdir()
    for path in (built_library, kernel_library.record_path(built_library)):
        shutil.copy2(path, folder / path.name)
    return folder / built_library.name


def test_a_prebuilt_library_is_loaded_before_anything_is_compiled(prebuilt, tmp_path):
    done = run_with_prebuilt(prebuilt.parent, tmp_path / "kernels", "op = c.compiled_step(); print(json.dumps([op is not None, k.status()]))")
    assert done.returncode == 0, done.stderr
    loaded, state = json.loads(done.stdout.strip().splitlines()[-1])
    assert loaded and state["source"] == "prebuilt" and state["library"] == str(prebuilt) and state["loaded"]
    assert "Warning" not in done.stderr and "compiling" not in done.stderr
    assert not (tmp_path / "kernels").exists()  # nothing was built or even tried


def test_a_prebuilt_library_of_another_torch_is_not_loaded_and_one_line_names_both_versions(prebuilt, tmp_path):
    record = kernel_library.record_path(prebuilt)
    built = json.loads(record.read_text(encoding="utf-8"))
    built["torch"] = "2.12.1"
    record.write_text(json.dumps(built), encoding="utf-8")
    done = run_with_prebuilt(prebuilt.parent, tmp_path / "kernels", "op = c.compiled_step(); print(json.dumps([op is not None, k.status()]))")
    assert done.returncode == 0, done.stderr
    loaded, state = json.loads(done.stdout.strip().splitlines()[-1])
    assert not loaded and state["source"] is None and "2.12.1" in state["prebuilt"]["refused"]
    said = [line for line in done.stderr.splitlines() if "not loading the prebuilt" in line]
    assert len(said) == 1 and "2.12.1" in said[0] and torch.__version__ in said[0] and "compiling them" in said[0]
    # then the variant is compiled as from the source distribution: here the compiler fails, so the Python step
    failed = (tmp_path / "kernels" / kernel_library.library_path().name).with_suffix(".failed")
    assert "fatal: no headers" in failed.read_text(encoding="utf-8") and "running the Python step" in done.stderr


def test_a_damaged_prebuilt_library_is_refused_and_never_loaded(prebuilt, tmp_path):
    data = prebuilt.read_bytes()
    prebuilt.write_bytes(data[:-1] + bytes([data[-1] ^ 0xFF]))
    done = run_with_prebuilt(prebuilt.parent, tmp_path / "kernels", "op = c.compiled_step(); print(json.dumps([op is not None, k.status()]))")
    loaded, state = json.loads(done.stdout.strip().splitlines()[-1])
    assert not loaded and "SHA-256" in state["prebuilt"]["refused"] and "SHA-256" in done.stderr


def code_of_mode(tmp_path, mode):
    """Stand-ins for the module that loads the prebuilt library and its folder, at ``mode``."""
    folder = tmp_path / "code"
    folder.mkdir(parents=True)
    module = folder / "kernel_library.py"
    module.write_text("", encoding="utf-8")
    module.chmod(mode & 0o666)
    folder.chmod(mode)
    return (module, folder)


def test_a_prebuilt_folder_that_the_code_s_group_may_write_as_pip_installs_it_under_umask_002_is_loaded(
        prebuilt, tmp_path, monkeypatch):
    monkeypatch.setattr(kernel_library, "PREBUILT_DIR", prebuilt.parent)
    for path in (prebuilt.parent, prebuilt, kernel_library.record_path(prebuilt)):
        path.chmod(0o775 if path.is_dir() else 0o664)
    monkeypatch.setattr(kernel_library, "CODE", code_of_mode(tmp_path, 0o775))
    assert kernel_library.refusal(prebuilt) is None
    # the same folder where the code itself is not group-writable: the group could change only the library
    monkeypatch.setattr(kernel_library, "CODE", code_of_mode(tmp_path / "private", 0o755))
    assert f"{prebuilt} may be written by others than" in kernel_library.refusal(prebuilt)


def test_a_prebuilt_folder_anyone_may_write_to_is_refused_whatever_the_code_s_mode(prebuilt, tmp_path, monkeypatch):
    monkeypatch.setattr(kernel_library, "PREBUILT_DIR", prebuilt.parent)
    monkeypatch.setattr(kernel_library, "CODE", code_of_mode(tmp_path, 0o777))
    prebuilt.chmod(0o666)
    assert f"{prebuilt} may be written by others than" in kernel_library.refusal(prebuilt)
    assert f"chmod go-w {prebuilt}" in kernel_library.refusal(prebuilt)


def test_the_kernel_folder_keeps_its_rule_whatever_the_code_s_mode(kernels, tmp_path, monkeypatch):
    monkeypatch.setattr(kernel_library, "CODE", code_of_mode(tmp_path, 0o775))
    kernels.parent.chmod(0o770)
    assert f"{kernels.parent} may be written by others (mode 770)" in kernel_library.refusal(kernels)
