"""Choose a biLM's default token vectors by WiC train accuracy and store them beside its weights.

    python -m lab.release.sense_vectors --model spacy_elmo/models/en_small --wic assets/datasets/wic \\
        --output results/en_small/VERSION/sense-vectors.json --write

The choice is ``spacy_elmo.probes.vector_choice`` (also ``python -m spacy_elmo vectors``, for an
installed package): this script runs it as a release does, the layer means over the open-licence
sample this repository carries (``corpus_sample/``: Gutenberg, movie reviews, EWT train text) by
default. The record is written through ``spacy_elmo.records.provenance`` (run it from a clean
checkout).
"""
import argparse
from pathlib import Path
from typing import List, Optional

from spacy_elmo.pipeline import create_pipeline
from spacy_elmo.probes.vector_choice import SENSE_EXAMPLE, choose_vectors, layer_means, sense_example, similarities  # noqa: F401
from spacy_elmo.records.provenance import mark_start

CORPUS = (
    "corpus_sample/pretrain/train/train-00.txt",
    "corpus_sample/pretrain/train/train-01.txt",
    "corpus_sample/domain/ewt-train.txt",
)
CORPUS_LICENCES = "public domain (Gutenberg), CC BY 4.0 (movie reviews), CC BY-SA 4.0 (UD EWT): corpus_sample/ATTRIBUTION.md"


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, required=True, help="our model directory (config.json + model.safetensors)")
    parser.add_argument("--wic", type=Path, required=True, help="the WiC release: a folder holding train/ and dev/")
    parser.add_argument("--corpus", type=Path, nargs="+", default=[Path(p) for p in CORPUS], help="text, a sentence a line")
    parser.add_argument("--output", type=Path, required=True, help="the record (JSON)")
    parser.add_argument("--write", action="store_true", help="write the chosen setting into MODEL/vectors.json")
    args = parser.parse_args(argv)
    mark_start()
    record, _ = choose_vectors(args.model, args.wic, args.corpus, create_pipeline, output=args.output, write=args.write,
                               licences=CORPUS_LICENCES, command="python -m lab.release.sense_vectors")
    before, after = record["sense_example"]["before"], record["sense_example"]["after"]
    print(f"chosen {record['chosen']}; WiC dev {record['wic_dev']}; example before {before['senses_apart']}, "
          f"after {after['senses_apart']}; {args.output}")


if __name__ == "__main__":
    main()
