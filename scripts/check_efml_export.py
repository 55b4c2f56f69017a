"""Check an exported ELMoForManyLangs directory with ELMoForManyLangs itself (run in a side
environment where `elmoformanylangs` 0.0.4.post2 is installed; not part of the tests, which hold
the export to load_efml, itself held to EFML's outputs):

    python -m spacy_elmo convert --to-efml --model tests/data/elmoformanylangs/model --output EXPORT_DIR
    EFML_VENV/bin/python scripts/check_efml_export.py EXPORT_DIR

Prints the largest difference between EFML's own layers (sents2elmo, output_layer=-2, one sentence
per call from a fresh Embedder, as the fixture was made) on the exported directory and the
fixture's golden outputs.
"""
import json
import sys
from pathlib import Path

import numpy as np
from elmoformanylangs import Embedder

DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "elmoformanylangs"


def main() -> None:
    exported = sys.argv[1]
    sentences = json.loads((DATA / "sentences.json").read_text(encoding="utf-8"))
    with np.load(DATA / "golden.npz") as golden:
        worst = 0.0
        for i, words in enumerate(sentences):
            if words:
                layers = Embedder(exported, batch_size=1).sents2elmo([words], output_layer=-2)[0]
                worst = max(worst, float(np.abs(layers - golden[f"layers_{i}"]).max()))
    print(f"largest difference from the fixture's golden outputs: {worst:.2e}")


if __name__ == "__main__":
    main()
