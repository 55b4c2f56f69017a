"""Run by test_multinode.py under torchrun: ``python -m spacy_elmo ARGS...`` whose worker of rank
$ELASTIC_KILL_RANK SIGKILLs itself at a point of its own progress, once in the whole job.

$ELASTIC_KILL is a ``tests/reliability/tiny_training.py`` KillPoint as WHERE:STEP[:NTH] ("step:13":
right after the optimizer update of step 13; "checkpoint:15:2": before the 2nd rename of the
checkpoint written at step 15). The first worker to get there creates $ELASTIC_KILL_MARKER, and a
marker already there (the group torchrun restarted) disarms the kill."""
import os
import runpy
import sys
from pathlib import Path

from tests.reliability.tiny_training import KillPoint, arm_kill


def kill_point(text: str) -> KillPoint:
    where, step, *nth = text.split(":")
    return KillPoint(where, int(step), nth=int(nth[0]) if nth else 1)


def arm_once(marker: Path, point: KillPoint, output: Path) -> None:
    try:
        # O_EXCL: one process in the job claims the kill, whichever node it runs on
        os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return
    marker.write_text(f"rank {os.environ['RANK']} (node of group rank {os.environ['GROUP_RANK']}) killed at {point}\n")
    arm_kill(point, output, 0)


def main(argv) -> None:
    if os.environ.get("ELASTIC_KILL_RANK") == os.environ.get("RANK"):
        output = Path(argv[argv.index("--output") + 1])
        arm_once(Path(os.environ["ELASTIC_KILL_MARKER"]), kill_point(os.environ["ELASTIC_KILL"]), output)
    sys.argv = ["spacy_elmo", *argv]
    runpy.run_module("spacy_elmo", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main(sys.argv[1:])
