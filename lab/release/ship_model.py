"""Copy a trained model directory into the package as the shipped biLM.

    python -m lab.release.ship_model --model RUN/finetune-ewt/model-best --output spacy_elmo/models/en_small

The biLM (config.json + model.safetensors) is copied as it is; the vocabulary and the softmax
come along so that fine-tuning continues from the shipped model without warming up a new
softmax. The softmax is stored in float16 to keep the package small (it is training-only and
read back into float32). MODEL_CARD.md in OUTPUT is left alone; a vectors.json made for the weights
shipped before is removed (``save_bilm``): choose the new model's with ``lab.release.sense_vectors``.
"""
import argparse
import hashlib
from pathlib import Path

import torch

from spacy_elmo.bilm.softmax import WordSoftmax
from spacy_elmo.io.native import read_config
from spacy_elmo.training.lm import LanguageModel
from spacy_elmo.training.model_dir import load_lm_parts, save_lm


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, required=True, help="a model directory written by pretrain/finetune")
    parser.add_argument("--output", type=Path, required=True)
    args = parser.parse_args()
    bilm, vocab, weights = load_lm_parts(args.model)
    if vocab is None or weights is None:
        raise SystemExit(f"{args.model} has no vocab.txt and softmax.safetensors: not a training output")
    softmax = WordSoftmax(len(vocab), bilm.config.projection_dim)
    softmax.load_state_dict(weights)
    extra = read_config(args.model).get("extra", {})
    extra = {k: v for k, v in extra.items() if k not in ("vocab_size", "softmax", "softmax_sha256")}
    save_lm(LanguageModel(bilm, softmax), vocab, args.output, extra=extra, softmax_dtype=torch.float16)
    sizes = {p.name: p.stat().st_size for p in sorted(args.output.iterdir()) if p.is_file()}
    total = sum(sizes.values())
    print(f"{args.output}: " + ", ".join(f"{k} {v / 1e6:.1f} MB" for k, v in sizes.items()) + f"; {total / 1e6:.1f} MB")
    print("weights sha256", hashlib.sha256((args.output / "model.safetensors").read_bytes()).hexdigest())


if __name__ == "__main__":
    main()
