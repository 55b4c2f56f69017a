"""Exported files (ONNX on ONNX Runtime's CPU provider, TorchScript) give load_bilm(...).embed's layers."""
import json
from pathlib import Path

import numpy as np
import pytest

from spacy_elmo.export import export_model, record_path
from spacy_elmo.files import file_sha256
from spacy_elmo.io import load_bilm

from .exported import run_file

pytest.importorskip("onnxruntime")

DATA = Path(__file__).parent.parent / "data"
TINY = DATA / "allennlp" / "tiny"
TRAINED = DATA / "allennlp" / "trained"
EFML = DATA / "elmoformanylangs" / "model"
# what load_bilm reads: (model path, options, weights)
SOURCES = {
    "published folder (tiny)": (TINY, None, None),
    "published pair (trained)": (None, TRAINED / "options.json", TRAINED / "lm_weights.hdf5"),
    "ELMoForManyLangs": (EFML, None, None),
    "our directory (en_small)": (None, None, None),
}
# ragged: lengths 1 to 21, longer and shorter than the example the graph was compiled with; an empty
# sentence; characters beyond ASCII; a token longer than the 50-character cut
RAGGED = [
    ["The", "bank", "of", "the", "river", "flooded", "."],
    ["Ok"],
    [],
    ["Über", "naïve", "café", "東京", "—", "x" * 70],
    ("a long sentence with many words repeats words so that the length is well past the example " * 1).split()
    + ["!"] * 4,
]
ONE = [["Money", "sits", "in", "a", "bank", "."]]


@pytest.fixture(scope="module", params=sorted(SOURCES))
def exported(request, tmp_path_factory):
    path, options, weights = SOURCES[request.param]
    folder = tmp_path_factory.mktemp("export")
    files = {fmt: folder / f"model.{fmt}" for fmt in ("onnx", "torchscript")}
    for fmt, file in files.items():
        export_model(path, file, fmt, options=options, weights=weights)
    # the default (optimized) path and the plain reference the file was compiled from
    references = [load_bilm(path, options=options, weights=weights, optimize=o) for o in (True, False)]
    return request.param, references, files


@pytest.mark.parametrize("fmt", ["onnx", "torchscript"])
@pytest.mark.parametrize("sentences", [RAGGED, ONE], ids=["ragged batch", "one sentence"])
def test_an_exported_file_gives_the_layers_load_bilm_embeds(exported, fmt, sentences):
    name, references, files = exported
    got = run_file(files[fmt]).embed(sentences)
    for reference in references:
        expected = reference.embed(sentences)
        assert [g.shape for g in got] == [e.shape for e in expected]
        worst = max(float(np.abs(g - e).max()) if e.size else 0.0 for g, e in zip(got, expected))
        assert worst <= 1e-5, f"{name} {fmt}: max abs diff {worst}"


@pytest.mark.parametrize("fmt", ["onnx", "torchscript"])
def test_padding_positions_of_an_exported_file_are_zero_and_rows_do_not_depend_on_the_batch(exported, fmt):
    files = exported[2]
    model = run_file(files[fmt])
    ids, lengths = model.batch_ids(RAGGED)
    batched = model.layers(ids, lengths)
    for row, n in enumerate(lengths):
        assert not batched[:, row, int(n):].any()
        alone = model.layers(ids[row : row + 1, : int(n)], lengths[row : row + 1])
        np.testing.assert_allclose(batched[:, row, : int(n)], alone[:, 0], atol=1e-5)


def test_the_record_names_the_model_its_weights_digest_and_the_char_ids(exported):
    name, (_, reference), files = exported
    record = json.loads(record_path(files["onnx"]).read_text(encoding="utf-8"))
    path, options, weights = SOURCES[name]
    weights_file = weights or (path / "weights.hdf5" if path == TINY else None)
    if weights_file is not None:
        assert record["model"]["weights_sha256"] == file_sha256(weights_file)
    assert record["file_sha256"] == file_sha256(files["onnx"])
    assert record["opset"] == 17 and record["torch"] and record["onnx"]["onnxruntime"]
    assert "OnnxRuntimeActivations" in record["activations"]
    assert record["char_ids"]["token_width"] == reference.token_width
    assert record["char_ids"]["name"] == ("learned" if reference.char_vocab is not None else "bytes")
    torchscript = json.loads(record_path(files["torchscript"]).read_text(encoding="utf-8"))
    assert "opset" not in torchscript and "activations" not in torchscript
