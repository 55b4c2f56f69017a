"""Fault injection on pretraining: SIGKILL at random points and during checkpoint
writes, damaged checkpoints and model files, a full disk. After each, ``--resume`` must end with the
weights of an uninterrupted run, bit for bit.

Runs use configs/bilm-tiny.cfg (dropout on, Adagrad, two epochs' worth of steps) in forked
processes (see tiny_training.py) that are killed with SIGKILL, as the OOM killer or a preempted
machine would. Each kill lands where the run's own progress reaches a planned point (a step, a
rename inside a checkpoint or model-last write, the corpus count), never after a wall-clock
delay, so the same kills happen on a fast machine and a slow one.
"""
import errno
import os
import random
import signal
import subprocess
from pathlib import Path
from typing import List

import pytest

from spacy_elmo import load_bilm
from spacy_elmo.io import ModelFileError
from spacy_elmo.io.native import WEIGHTS_NAME
from spacy_elmo.pipeline import create_pipeline
from spacy_elmo.training.checkpoints import LM_NAME, STATE_NAME, TRAINING_NAME, list_checkpoints
from spacy_elmo.training.checkpoints import read_checkpoint
from spacy_elmo.training.model_dir import SOFTMAX_NAME, load_lm_parts

from .tiny_training import KillPoint, assert_same_weights, final_weights, run, start_child, tiny_config, write_corpus

STEPS = 40
# how long a child may take before the test calls it hung (a guard, not a measure of progress)
HANG_S = 900
SETTINGS = {"max_steps": STEPS, "checkpoint_frequency": 4, "keep_checkpoints": 3}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    return write_corpus(tmp_path_factory.mktemp("corpus") / "train.txt", lines=300)


@pytest.fixture(scope="module")
def reference(corpus, tmp_path_factory) -> Path:
    """The uninterrupted run every interrupted one must reproduce."""
    output = tmp_path_factory.mktemp("reference") / "run"
    run(tiny_config(corpus, **SETTINGS), output)
    return output


def _finish(config, output: Path) -> None:
    child = start_child(config, output, resume=True)
    child.join(HANG_S)
    assert child.exitcode == 0, f"resumed run failed with exit code {child.exitcode}"


def _killed_at(config, output: Path, point: KillPoint) -> int:
    """Run until the child kills itself at ``point``. RETURNS the newest checkpoint's step after it."""
    start = _newest_step(output)
    child = start_child(config, output, resume=output.exists(), kill=point, start_step=start)
    child.join(HANG_S)
    assert child.exitcode == -signal.SIGKILL, f"{point}: exit code {child.exitcode}, not a SIGKILL"
    return _newest_step(output)


def _names(directory: Path) -> List[str]:
    try:
        return os.listdir(directory)
    except FileNotFoundError:
        return []


def _newest_step(output: Path) -> int:
    kept = [n for n in _names(output / "checkpoints") if n.startswith("step-")]
    return max((int(n[len("step-") :]) for n in kept), default=0)


def _kill_plan(seed: int):
    """A kill while the corpus is counted, then five at random points: inside steps, inside
    checkpoint writes, inside model-last writes. RETURNS (points, newest checkpoint after each)."""
    rng = random.Random(seed)
    points, expected, newest = [KillPoint("startup", nth=rng.randint(1, 200))], [0], 0
    for where in rng.sample(["step", "step", "checkpoint", "checkpoint", "model-last"], 5):
        if where == "step":
            step = rng.randint(newest + 1, newest + 6)
            newest = 4 * ((step - 1) // 4)  # the update of a checkpoint step is not in it yet
        else:
            step = newest + 4 * rng.randint(1, 2)
            # a checkpoint write is killed before the directory's rename; model-last comes after it
            newest = step - 4 if where == "checkpoint" else step
        points.append(KillPoint(where, step, nth=rng.randint(1, 4)))
        expected.append(newest)
    return points, expected


@pytest.mark.slow
def test_sigkill_at_random_points_then_resume_gives_the_uninterrupted_weights(corpus, reference, tmp_path):
    """One kill during start-up (vocabulary counting), five at random points after random
    checkpoints (inside steps, checkpoint writes, model-last writes): the resumed run ends
    bit-identical. Resuming restores the weights, optimizer, RNG and data position of the
    checkpoint and replays the same single-threaded computation, so bitwise equality is what
    the code guarantees."""
    config, output = tiny_config(corpus, **SETTINGS), tmp_path / "run"
    points, expected = _kill_plan(seed=5)
    assert {p.where for p in points} == {"startup", "step", "checkpoint", "model-last"}
    kills = [_killed_at(config, output, point) for point in points]
    assert kills == expected and kills[-1] < STEPS, (points, kills)
    _finish(config, output)
    assert_same_weights(final_weights(output), final_weights(reference))
    load_lm_parts(output / "model-last")


def test_resuming_a_finished_run_changes_nothing(corpus, reference, tmp_path):
    # a kill after the final checkpoint (while model-best or the learning curve is written) must
    # not make --resume train past max_steps
    output = tmp_path / "run"
    subprocess.run(["cp", "-r", str(reference), str(output)], check=True)
    run(tiny_config(corpus, **SETTINGS), output, resume=True)
    assert list_checkpoints(output / "checkpoints")[-1].name == f"step-{STEPS:08d}"
    assert_same_weights(final_weights(output), final_weights(reference))


@pytest.mark.slow
def test_sigkill_during_checkpoint_and_model_writes(corpus, reference, tmp_path):
    config, output = tiny_config(corpus, **SETTINGS), tmp_path / "run"
    checkpoints, model_last = output / "checkpoints", output / "model-last"
    # before the 2nd file of the checkpoint at step 4, before model-last's 3rd file at step 8 (its
    # softmax and vocabulary are new, the biLM not), before the checkpoint at step 12 is renamed
    plan = [KillPoint("checkpoint", 4, nth=2), KillPoint("model-last", 8, nth=3), KillPoint("checkpoint", 12, nth=4)]
    for point in plan:
        newest = _killed_at(config, output, point)
        if point.where == "checkpoint":
            assert newest == point.step - 4
            # the half-written checkpoint is invisible; the newest listed one reads back intact
            assert any(".tmp-" in n for n in _names(checkpoints)), _names(checkpoints)
            kept = list_checkpoints(checkpoints)
            assert all(p.name.startswith("step-") for p in kept)
            if kept:
                read_checkpoint(kept[-1])
        else:
            assert newest == point.step
            assert any(".tmp-" in n for n in _names(model_last)), _names(model_last)
            # model-last is either whole or refused by its checksum, never silently mixed
            with pytest.raises(ModelFileError) as err:
                load_lm_parts(model_last)
            assert err.value.path.startswith(str(model_last)), err
    _finish(config, output)
    assert_same_weights(final_weights(output), final_weights(reference))


def _partial_checkpoints(output: Path) -> List[str]:
    return sorted(n for n in _names(output / "checkpoints") if ".tmp-" in n)


def test_resume_removes_partial_checkpoints_of_killed_runs(corpus, tmp_path):
    # every kill inside a checkpoint write leaves a temporary directory as big as a checkpoint;
    # a job restarted for days must not pile them up
    output = tmp_path / "run"
    run(tiny_config(corpus, **{**SETTINGS, "max_steps": 4}), output)
    for pid in (999991, 999992):
        stale = output / "checkpoints" / f".step-00000008.tmp-{pid}"
        stale.mkdir()
        (stale / LM_NAME).write_bytes(b"half a checkpoint")
    run(tiny_config(corpus, **{**SETTINGS, "max_steps": 8}), output, resume=True)
    assert [p.name for p in list_checkpoints(output / "checkpoints")] == ["step-00000004", "step-00000008"]
    assert _partial_checkpoints(output) == []


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _flip_bit(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x10
    path.write_bytes(bytes(data))


DAMAGE = {
    "truncated lm": (LM_NAME, _truncate),
    "bit flip in lm": (LM_NAME, _flip_bit),
    "truncated training state": (TRAINING_NAME, _truncate),
    "bit flip in training state": (TRAINING_NAME, _flip_bit),
    "truncated state.json": (STATE_NAME, _truncate),
    "missing lm": (LM_NAME, lambda p: p.unlink()),
}


@pytest.mark.parametrize("kind", sorted(DAMAGE))
def test_damaged_checkpoint_is_refused_naming_the_file(reference, tmp_path, kind):
    name, damage = DAMAGE[kind]
    checkpoint = tmp_path / "step"
    subprocess.run(["cp", "-r", str(list_checkpoints(reference / "checkpoints")[-1]), str(checkpoint)], check=True)
    read_checkpoint(checkpoint)
    damage(checkpoint / name)
    with pytest.raises(ValueError) as err:
        read_checkpoint(checkpoint)
    assert name in str(err.value), f"the error must name the file: {err.value}"


@pytest.mark.slow
def test_resume_skips_damaged_checkpoints_and_still_matches(corpus, reference, tmp_path):
    output = tmp_path / "run"
    run(tiny_config(corpus, **{**SETTINGS, "max_steps": 20}), output)
    steps = [int(p.name.split("-")[1]) for p in list_checkpoints(output / "checkpoints")]
    assert steps == [12, 16, 20]
    newest, second = list_checkpoints(output / "checkpoints")[-2:][::-1]
    _truncate(newest / LM_NAME)
    _flip_bit(second / TRAINING_NAME)
    with pytest.warns(RuntimeWarning) as warned:
        run(tiny_config(corpus, **SETTINGS), output, resume=True)
    messages = [str(w.message) for w in warned if "damaged checkpoint" in str(w.message)]
    assert any(str(newest) in m and LM_NAME in m for m in messages), messages
    assert any(str(second) in m and TRAINING_NAME in m for m in messages), messages
    assert_same_weights(final_weights(output), final_weights(reference))


def test_damaged_model_files_are_refused_naming_the_file(reference, tmp_path):
    for name, damage in [(WEIGHTS_NAME, _truncate), (WEIGHTS_NAME, _flip_bit), (SOFTMAX_NAME, _flip_bit)]:
        model = tmp_path / f"{name}-{damage.__name__}"
        subprocess.run(["cp", "-r", str(reference / "model-last"), str(model)], check=True)
        damage(model / name)
        with pytest.raises(ModelFileError, match="checksum mismatch") as err:
            load_lm_parts(model)
        assert err.value.path == str(model / name)
        if name == WEIGHTS_NAME:
            with pytest.raises(ModelFileError, match="checksum mismatch"):
                load_bilm(model)
            nlp = create_pipeline(load_bilm(reference / "model-last"))
            with pytest.raises(ModelFileError, match="checksum mismatch") as err:
                nlp.get_pipe("elmo").initialize(lambda: [], model=model)
            assert err.value.path == str(model / name)


# set by .ci/run, which runs as root: there the full-disk case must run, never skip
REQUIRE_TMPFS = "SPACY_ELMO_REQUIRE_TMPFS"


def _tmpfs(path: Path, size: int) -> None:
    path.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True)
    if done.returncode != 0:
        reason = f"cannot mount a small tmpfs to fill up (needs root and CAP_SYS_ADMIN): {done.stderr!r}"
        if os.environ.get(REQUIRE_TMPFS) == "1":
            pytest.fail(f"{REQUIRE_TMPFS}=1 but {reason}")
        pytest.skip(reason)


def _disk_usage(directory: Path) -> int:
    """Bytes a copy of ``directory`` takes on tmpfs (files rounded up to 4 KiB pages)."""
    return sum(-(-p.stat().st_size // 4096) * 4096 for p in directory.rglob("*") if p.is_file())


@pytest.mark.slow
def test_full_disk_during_a_checkpoint_write(corpus, reference, tmp_path):
    """The disk fills up while the second checkpoint is written: the error reaches the user, the
    first checkpoint stays intact, and after space is freed --resume ends where the reference does."""
    first = list_checkpoints(reference / "checkpoints")[0]
    step_size = _disk_usage(first)
    others = sum(_disk_usage(reference / name) for name in ("model-last",)) + 8 * 4096
    output = tmp_path / "disk"
    _tmpfs(output, others + step_size + step_size // 2)
    try:
        config = tiny_config(corpus, **{**SETTINGS, "keep_checkpoints": 1})
        with pytest.raises(OSError) as err:
            run(config, output / "run")
        assert err.value.errno == errno.ENOSPC
        assert any(entry.name == "save_checkpoint" for entry in err.traceback), "not in a checkpoint write"
        assert ".step-00000008.tmp-" in str(err.value), f"the error must name the file: {err.value}"
        kept = list_checkpoints(output / "run" / "checkpoints")
        assert [p.name for p in kept] == ["step-00000004"]
        assert read_checkpoint(kept[0]).step == 4
        load_lm_parts(output / "run" / "model-last")
        partial = _partial_checkpoints(output / "run")
        subprocess.run(["mount", "-o", "remount,size=64m", str(output)], check=True)
        run(config, output / "run", resume=True)
        assert_same_weights(final_weights(output / "run"), final_weights(reference))
        # the half-written checkpoint would keep the disk full: it must not outlive the error
        assert partial == [], f"left on the full disk: {partial}"
    finally:
        subprocess.run(["umount", "-l", str(output)], check=False)
