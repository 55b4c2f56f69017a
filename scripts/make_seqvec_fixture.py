"""Write the SeqVec-style fixture: tests/data/contributed/seqvec/uniref50_v2/options.json and
weights.hdf5, the folder SeqVec's seqvec.zip holds, with a tiny biLM's random weights in AllenNLP's
HDF5 layout (``export_allennlp``, the layout bilm-tf's ``dump_weights`` writes and AllenNLP reads).

    .venv/bin/python scripts/make_seqvec_fixture.py

The published SeqVec model has the same two files under the same names, hundreds of MB; the
fixture keeps their names and nesting, not their size.
"""
from pathlib import Path

import torch

from spacy_elmo.bilm import BiLM, BiLMConfig
from spacy_elmo.io import export_allennlp

TARGET = Path(__file__).resolve().parents[1] / "tests" / "data" / "contributed" / "seqvec" / "uniref50_v2"


def main() -> None:
    torch.manual_seed(20190312)
    config = BiLMConfig(char_embedding_dim=4, filters=((1, 4), (2, 4), (3, 8)), n_highway=1, dim=16,
                        projection_dim=8, n_layers=2)
    bilm = BiLM(config)
    with torch.no_grad():  # small recurrent weights keep the outputs away from chaotic rounding
        for name, param in bilm.named_parameters():
            if "state_linearity" in name:
                param.mul_(0.5)
    export_allennlp(bilm.eval(), TARGET / "options.json", TARGET / "weights.hdf5")
    print(f"wrote {TARGET}")


if __name__ == "__main__":
    main()
