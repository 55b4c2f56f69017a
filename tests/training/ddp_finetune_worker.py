"""Run by test_distributed.py under torchrun (``-m tests.training.ddp_finetune_worker`` from the checkout): a
tiny fine-tuning whose ``autocast = "auto"`` the main process times and every process takes. The timing
is fixed (bf16 the slower) on a CPU said to have bf16 arithmetic, where a process deciding alone by the
device's rule would take bf16; each rank prints the precision it trains in."""
import importlib
import io
import sys

from spacy_elmo.fast import precision, train_payoff

from tests.training.conftest import tiny_config

finetune_module = importlib.import_module("spacy_elmo.training.finetune")  # the module, not the function the package exports


def main(train: str, dev: str, start: str, output: str) -> None:
    precision.cpu_has_bf16 = lambda: True
    train_payoff.time_products = lambda *shape: ([100.0] * 7, [150.0] * 7)
    original = finetune_module.train_lm

    def train_lm(lm, vocab, corpus, *, settings, info, **kwargs):
        print(f"rank {info.rank}: trains in autocast {settings.autocast}", flush=True)
        return original(lm, vocab, corpus, settings=settings, info=info, **kwargs)

    finetune_module.train_lm = train_lm
    config = tiny_config(train, dev, finetune__autocast="auto", training__max_steps=2)
    finetune_module.finetune(config, output, model=start, stream=io.StringIO())


if __name__ == "__main__":
    main(*sys.argv[1:5])
