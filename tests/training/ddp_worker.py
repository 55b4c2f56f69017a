"""Run by test_distributed.py under torchrun (``-m tests.training.ddp_worker`` from the checkout): tiny pretraining, then every rank saves its own weights
and reports the process group's threads still running after ``shutdown``."""
import json
import os
import sys
import time
from pathlib import Path
from typing import List

from safetensors.torch import save_file

from spacy_elmo.training.distributed import barrier, shutdown
from spacy_elmo.training.loop import train_lm
from spacy_elmo.training.pretrain import build_pretraining
from spacy_elmo.training.setup import dev_reader, setup_process

from tests.training.conftest import tiny_config


def main(train: str, dev: str, output: str) -> None:
    config = tiny_config(train, dev, training__max_steps=12, training__checkpoint_frequency=5, training__eval_frequency=6,
                         training__log_frequency=3, training__dropout=0.1, softmax__n_samples=8)
    out = Path(output)
    device, info = setup_process(config, "cpu")
    assert info.world_size == 2, "run under torchrun --nproc_per_node 2"
    if info.is_main:
        out.mkdir(parents=True, exist_ok=True)
    barrier(info)
    lm, vocab, corpus, steps = build_pretraining(config, out, info, device, resume=False)
    corpus.reads = []  # the byte ranges this rank reads while training
    summary = train_lm(lm, vocab, corpus, settings=config.training, corpus_settings=config.corpus, seed=config.seed,
                       output=out, info=info, dev_segments=dev_reader(config), steps_per_epoch=steps)
    state = {k: v.detach().contiguous() for k, v in lm.state_dict().items()}
    save_file(state, str(out / f"rank{info.rank}.safetensors"))
    (out / f"reads-rank{info.rank}.json").write_text(json.dumps(sorted({(str(p), a, b) for p, a, b in corpus.reads})))
    print(f"rank {info.rank}: {summary.steps} steps, {summary.tokens} tokens")
    shutdown(info)
    # a joined thread may take a moment to leave /proc; one still there after 5 s was not joined
    deadline = time.monotonic() + 5.0
    while backend_threads() and time.monotonic() < deadline:
        time.sleep(0.05)
    print(f"rank {info.rank}: {len(backend_threads())} backend threads after shutdown")


def backend_threads() -> List[str]:
    """This process's gloo threads (``pt_gloo_runloop``, ``gloo_tcp_loop``), by the names Linux gives them.

    Any still running when the interpreter finalizes can abort the process after a finished run.
    """
    names = [(Path("/proc/self/task") / task / "comm").read_text().strip() for task in os.listdir("/proc/self/task")]
    return [name for name in names if "gloo" in name]


if __name__ == "__main__":
    main(*sys.argv[1:])
