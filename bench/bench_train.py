"""biLM pretraining step (forward + backward) throughput against the straightforward baseline.

    python -m bench.bench_train --config configs/bilm-small.cfg --threads 2 --json results/bench/CPU/train.json
    python -m bench.bench_train --quick

The model is the one the config's [model] section describes, random weights, train mode.
A batch is [training] batch_size sentences of the EWT training set (``--train-data``), capped at
max_batch_tokens tokens, as the "sentences" training mode builds them. The loss is a fixed
random linear function of the top layer: the word softmax is the same code on both sides
and is left out, so the ratio is the biLM's own. Gradients of both sides are compared.
"""
import argparse
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

import numpy as np
import torch
from thinc.api import Config

from spacy_elmo.bilm import BiLM, BiLMConfig
from spacy_elmo.records.provenance import data_record, mark_start, portable_path, provenance

from .baseline import BaselineBiLM
from .workloads import (
    SHAPES,
    add_data_options,
    bench_command,
    char_batch,
    conllu_sentences,
    data_file,
    display_path,
    first_batch,
    resolve_data_options,
)

# Gradients compared between the two sides: (our parameter name, the baseline's).
COMPARED = [
    ("forward_lstm.layers.0.state_linearity.weight", "forward_layers.0.state_linearity.weight"),
    ("backward_lstm.layers.1.input_linearity.weight", "backward_layers.1.input_linearity.weight"),
    ("token_encoder.char_embedding.weight", "char_embedding.weight"),
    ("token_encoder.highway.transform.0.weight", "transform.0.weight"),
]


def main(argv: Optional[List[str]] = None) -> Dict:
    args = parse_args(argv)
    command = bench_command("bench.bench_train", argv)
    mark_start(command)
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    config, batch_size, max_tokens = model_shape(args)
    train = data_file(args.train_data, "train")
    sentences = training_batch(batch_size, max_tokens, train)
    ours = BiLM(config).train()
    baseline = BaselineBiLM(ours).train()
    ids, lengths = char_batch(sentences, config.max_characters_per_token)
    readout = torch.randn(config.output_dim) / config.output_dim**0.5
    steps = {
        "baseline": lambda: (baseline(ids, lengths)[-1] * readout).sum(),
        "ours": lambda: (ours(ids, lengths).layers[-1] * readout).sum(),
    }
    times, losses, grads = time_steps(steps, {"ours": ours, "baseline": baseline}, args.repeats)
    tokens = int(lengths.sum()) - 2 * len(lengths)
    report: Dict = {
        "command": command,
        "threads": args.threads,
        "config": config.to_options(),
        "batch": {"sentences": len(sentences), "tokens": tokens, "source": display_path(train)},
        "loss_diff": abs(losses["ours"] - losses["baseline"]),
        "grad_rel_diff": gradient_differences(grads["ours"], grads["baseline"]),
        "modes": {},
    }
    report["provenance"] = provenance(
        model=None, model_note="random weights (torch seed 0) of the "
        + ("tiny shape" if args.quick else f"shape of the [model] section of {portable_path(args.config)}"),
        data=data_record([train]),
    )
    for name in steps:
        best = min(times[name])
        report["modes"][name] = {
            "seconds": best,
            "tokens_per_s": tokens / best,
            "speedup_vs_baseline": min(times["baseline"]) / best,
        }
    print(markdown(report))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(__import__("json").dumps(report, indent=2), encoding="utf-8")
    return report


def parse_args(argv: Optional[List[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="configs/bilm-small.cfg")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", default=None)
    parser.add_argument("--quick", action="store_true", help="tiny model, a few sentences")
    add_data_options(parser, train=True)
    return resolve_data_options(parser.parse_args(argv))


def model_shape(args: argparse.Namespace) -> Tuple[BiLMConfig, int, int]:
    """The biLM shape and the batch caps (sentences, tokens) of the config's [training] section."""
    if args.quick:
        return SHAPES["tiny"], 8, 400
    cfg = Config().from_disk(args.config)
    config = BiLMConfig(**{k: v for k, v in cfg["model"].items()})
    return config, int(cfg["training"]["batch_size"]), int(cfg["training"]["max_batch_tokens"])


def time_steps(
    steps: Dict[str, Callable[[], torch.Tensor]], modules: Dict[str, torch.nn.Module], repeats: int
) -> Tuple[Dict[str, List[float]], Dict[str, float], Dict[str, Dict[str, torch.Tensor]]]:
    """Time forward + backward of each side, interleaved, after a warm-up round.

    RETURNS: per side, the seconds of each repeat, the last loss, and the last gradients by parameter name.
    """
    times: Dict[str, List[float]] = {name: [] for name in steps}
    losses, grads = {}, {}
    for repeat in range(repeats + 1):
        for name, step in steps.items():
            for module in modules.values():
                module.zero_grad(set_to_none=True)
            start = time.perf_counter()
            loss = step()
            loss.backward()
            elapsed = time.perf_counter() - start
            if repeat:  # the first round warms up
                times[name].append(elapsed)
            losses[name] = float(loss.detach())
            grads[name] = {n: p.grad.clone() for n, p in modules[name].named_parameters() if p.grad is not None}
    return times, losses, grads


def gradient_differences(ours: Dict[str, torch.Tensor], base: Dict[str, torch.Tensor]) -> Dict[str, float]:
    """The relative difference of each ``COMPARED`` gradient, ours against the baseline's."""
    return {
        ours_name: float((ours[ours_name] - base[base_name]).norm() / base[base_name].norm())
        for ours_name, base_name in COMPARED
        if base_name in base and ours_name in ours
    }


def training_batch(batch_size: int, max_tokens: int, train: Path) -> List[List[str]]:
    """Consecutive sentences of ``train`` (CoNLL-U), at most batch_size of them and max_tokens tokens."""
    return first_batch(conllu_sentences(train), batch_size, max_tokens)


def markdown(report: Dict) -> str:
    lines = [
        f"Command: `{report['command']}`",
        "",
        f"Batch: {report['batch']['sentences']} sentences, {report['batch']['tokens']} tokens; "
        f"{report['threads']} threads. Loss difference {report['loss_diff']:.1e}; gradient relative "
        f"differences {', '.join(f'{v:.1e}' for v in report['grad_rel_diff'].values())}.",
        "",
        "| pretraining step (forward + backward) | tokens/s | x baseline |",
        "|---|---:|---:|",
    ]
    for name, s in report["modes"].items():
        lines.append(f"| {name} | {s['tokens_per_s']:.1f} | {s['speedup_vs_baseline']:.2f} |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
