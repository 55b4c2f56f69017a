import io
import json

import numpy as np

from spacy_elmo.io import save_bilm
from spacy_elmo.probes.features import VectorCache, weights_hash

from .conftest import PlantedFeatures


def test_vectors_are_kept_on_disk_by_model_and_file_hash(tmp_path):
    source = tmp_path / "data.txt"
    source.write_text("a b\nc\n", encoding="utf-8")
    sentences = [("a", "b"), ("c",)]
    model = PlantedFeatures({(("a", "b"), 0): 1}, layer=0)
    first = VectorCache(model, model_hash="m1" * 8, directory=tmp_path / "cache", quiet=True).layers(sentences, source=source)
    assert len(model.calls) == 2 and len(list((tmp_path / "cache").glob("*.npz"))) == 1

    again = VectorCache(model, model_hash="m1" * 8, directory=tmp_path / "cache", quiet=True)
    read = again.layers(sentences[:1], source=source)
    assert len(model.calls) == 2 and again.tokens_embedded == 0
    assert np.array_equal(read[0], first[0])

    VectorCache(model, model_hash="m2" * 8, directory=tmp_path / "cache", quiet=True).layers(sentences, source=source)
    assert len(model.calls) == 4  # other weights: other file
    source.write_text("a b\nc\nd\n", encoding="utf-8")
    VectorCache(model, model_hash="m1" * 8, directory=tmp_path / "cache", quiet=True).layers(sentences, source=source)
    assert len(model.calls) == 6  # the file changed
    assert len(list((tmp_path / "cache").glob("*.npz"))) == 3


def test_cache_of_a_real_bilm_matches_embed_and_reports_progress(small_bilm):
    stream = io.StringIO()
    sentences = [("the", "cat", "sat"), ("a", "dog"), ("the", "cat", "sat")]
    cache = VectorCache(small_bilm, model_hash=weights_hash(small_bilm), stream=stream, batch_size=2)
    got = cache.layers(sentences, label="demo")
    expected = small_bilm.embed([list(s) for s in sentences])
    assert all(np.allclose(g, e, atol=1e-6) for g, e in zip(got, expected))
    assert cache.tokens_embedded == 5
    assert "embedding demo: 5/5 tokens" in stream.getvalue() and "tok/s" in stream.getvalue()


def test_weights_hash_is_the_saved_models_checksum(small_bilm, tmp_path):
    save_bilm(small_bilm, tmp_path / "model")
    saved = json.loads((tmp_path / "model" / "config.json").read_text())["weights_sha256"]
    assert weights_hash(small_bilm) == saved
