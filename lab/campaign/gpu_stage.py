"""One accelerator stage of the campaign: continue training a biLM on the pretraining corpus on a GPU
for a fixed time, then pack the result into pieces small enough to bring back.

On the GPU machine (torch there, spaCy not needed; what to bring along: docs/pretraining.md, "On a
GPU"):

    python -m lab.campaign.gpu_stage --model spacy_elmo/models/en_small --corpus CORPUS --output RUN \\
        --minutes 7 --device cuda --parts PIECES

On the machine PIECES is brought back to, they become a model directory again (checked against
their SHA-256):

    python -m lab.campaign.gpu_stage --join PIECES --output RUN/gpu-stage

The stage is ``finetune`` (``spacy_elmo.training.finetune``) of ``--model`` (a model directory
with its vocabulary and softmax: the shipped model, or a campaign stage's model-best) on
``CORPUS/pretrain/train`` with ``CORPUS/pretrain/dev.txt`` held out, with ``--config``'s shape and
the recipe below (``--set KEY=VALUE`` changes any setting). It imports neither spaCy nor thinc,
which such a machine may lack. ``--parts DIR`` packs the run's model-best/, metrics.jsonl,
learning-curve.png and finetune-report.json into one tar, cut into pieces of at most
``--part-mb`` MB, with a manifest.
"""
import argparse
import hashlib
import io
import json
import platform
import tarfile
from pathlib import Path
from typing import Dict, List, Optional

from lab import CHECKOUT

ROOT = CHECKOUT
# Continuing the campaign's pretraining: Adam at a constant rate near where the campaign's
# inverse-sqrt decay has brought it (0.002 * sqrt(200 / 7,000) = 0.00034), its batches.
RECIPE = {
    "training.optimizer": "adam",
    "training.learning_rate": 0.0003,
    "training.lr_schedule": "constant",
    "training.batch_size": 256,
    "training.max_batch_tokens": 6144,
    "training.eval_frequency": 300,
    "training.checkpoint_frequency": 300,
    "training.max_epochs": 100,
    # the stage continues pretraining: its vocabulary kept, its own text alone (finetune's defaults add
    # domain words, replay and score general text, and take bf16 where the device has bf16 arithmetic)
    "finetune.add_words": 0,
    "finetune.replay": None,
    "finetune.general": None,
    "finetune.autocast": "off",
}
KEPT = ("model-best", "metrics.jsonl", "learning-curve.png", "finetune-report.json")
MANIFEST = "gpu-stage-manifest.json"


def main(argv: Optional[List[str]] = None) -> Dict:
    args = parse_args(argv)
    if args.join:
        return join_parts(args.join, args.output)
    from spacy_elmo.training.config import load_lm_config
    from spacy_elmo.training.finetune import finetune

    corpus = args.corpus
    overrides = {**RECIPE, "paths.train": str(corpus / "pretrain" / "train"), "paths.dev": str(corpus / "pretrain" / "dev.txt")}
    overrides.update(dict(setting_arg(s) for s in args.set))
    config = load_lm_config(args.config, overrides)
    result = finetune(config, args.output, model=args.model, max_time=args.minutes * 60, device=args.device)
    summary = result.summary
    report = {
        "model": str(args.model), "device": args.device, "machine": _machine(args.device),
        "steps": summary.steps, "tokens": summary.tokens, "tokens_per_s": summary.tokens_per_second,
        "stopped_by": summary.stopped_by, "before": result.before, "after": result.after, "overrides": overrides,
    }
    (args.output / "gpu-stage.json").write_text(json.dumps(report, indent=2), encoding="utf-8")
    print(json.dumps({k: report[k] for k in ("device", "steps", "tokens", "tokens_per_s", "stopped_by")}))
    if args.parts:
        report["parts"] = pack_parts(args.output, args.parts, int(args.part_mb * 1e6))
    return report


def parse_args(argv: Optional[List[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, help="model directory to continue (with vocab.txt and softmax.safetensors)")
    parser.add_argument("--corpus", type=Path, help="the campaign corpus (pretrain/train, pretrain/dev.txt)")
    parser.add_argument("--output", type=Path, required=True, help="run directory; with --join, where the model goes")
    parser.add_argument("--minutes", type=float, default=7.0, help="training time, evaluations included")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--config", type=Path, default=ROOT / "configs" / "bilm-small.cfg")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a config setting (repeatable)")
    parser.add_argument("--parts", type=Path, help="pack the result into this folder in pieces")
    parser.add_argument("--part-mb", type=float, default=15.0)
    parser.add_argument("--join", type=Path, help="unpack pieces from this folder into --output (no training)")
    args = parser.parse_args(argv)
    if not args.join and (args.model is None or args.corpus is None):
        parser.error("--model and --corpus are needed to train (or --join PARTS to unpack)")
    return args


def setting_arg(text: str):
    """A --set KEY=VALUE argument: the key and the value read as JSON (a bare string when it is not)."""
    key, sep, value = text.partition("=")
    if not sep:
        raise SystemExit(f"--set takes KEY=VALUE, not {text!r}")
    try:
        return key, json.loads(value)
    except json.JSONDecodeError:
        return key, value


def _machine(device: str) -> Dict:
    import torch

    info = {"torch": torch.__version__, "python": platform.python_version(), "cpu": platform.processor() or platform.machine()}
    if device.startswith("cuda") and torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
    return info


def pack_parts(run: Path, parts: Path, part_bytes: int) -> List[str]:
    """Tar the run's kept files, cut the tar into pieces of ``part_bytes``; RETURNS the piece names."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name in KEPT + ("gpu-stage.json",):
            if (run / name).exists():
                tar.add(run / name, arcname=name)
    data = buffer.getvalue()
    parts.mkdir(parents=True, exist_ok=True)
    names = []
    for k, start in enumerate(range(0, len(data), part_bytes)):
        names.append(f"gpu-stage.tar.part{k}")
        (parts / names[-1]).write_bytes(data[start : start + part_bytes])
    manifest = {"parts": names, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    (parts / MANIFEST).write_text(json.dumps(manifest, indent=2), encoding="utf-8")
    return names


def join_parts(parts: Path, output: Path) -> Dict:
    """Put the pieces back together, check them, and unpack them into ``output``."""
    manifest = json.loads((parts / MANIFEST).read_text(encoding="utf-8"))
    data = b"".join((parts / name).read_bytes() for name in manifest["parts"])
    if len(data) != manifest["bytes"] or hashlib.sha256(data).hexdigest() != manifest["sha256"]:
        raise SystemExit(f"{parts}: the pieces do not add up to what was packed (missing or damaged piece)")
    output.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r") as tar:
        tar.extractall(output, filter="data")  # no absolute paths, links or devices
    print(f"unpacked {len(manifest['parts'])} pieces into {output}")
    return manifest


if __name__ == "__main__":
    main()
