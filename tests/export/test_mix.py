"""The export's record carries the component's mix: the mixed vector computed from an exported file's
layers and the record, as docs/export.md shows it, is ``doc._.elmo.mixed``."""
import json

import numpy as np
import spacy

from spacy_elmo.export import export_model, record_path
from spacy_elmo.io.loading import shipped_model_dir

from .exported import run_file


def test_the_mixed_vector_from_an_exported_file_and_its_record_is_doc_elmo_mixed(tmp_path):
    output = tmp_path / "en_small.pt"
    export_model(None, output, "torchscript")
    record = json.loads(record_path(output).read_text(encoding="utf-8"))
    mix = record["mix"]
    shipped = json.loads((shipped_model_dir() / "vectors.json").read_text(encoding="utf-8"))
    assert mix["weights"] == shipped["layer_weights"] and mix["gamma"] == 1.0  # the shipped model's vectors.json

    nlp = spacy.blank("en")
    nlp.add_pipe("elmo")
    doc = nlp("I deposited the cash at the bank by the river.")
    [layers] = run_file(output).embed([[t.text for t in doc]])  # (L+1, n_tokens, width)
    # as docs/export.md computes it
    weights = np.asarray(mix["weights"], dtype=np.float32)
    means = 0.0 if mix["layer_means"] is None else np.asarray(mix["layer_means"], dtype=np.float32)[:, None, :]
    mixed = mix["gamma"] * np.tensordot(weights, layers - means, axes=1)
    assert mixed.shape == doc._.elmo.mixed.shape
    assert np.abs(mixed - doc._.elmo.mixed).max() <= 1e-5


def test_a_biLM_without_a_vector_setting_records_equal_weights_and_no_means(tmp_path, tiny_paths):
    output = tmp_path / "tiny.pt"
    export_model(None, output, "torchscript", options=tiny_paths[0], weights=tiny_paths[1])
    mix = json.loads(record_path(output).read_text(encoding="utf-8"))["mix"]
    assert mix["weights"] == [1 / 3] * 3 and mix["layer_means"] is None
