import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import spacy
import torch
from spacy.tokens import Doc, DocBin
from spacy.util import load_model_from_config

from spacy_elmo import load_bilm
from spacy_elmo.architectures import UNLOADED, bilm_shape
from spacy_elmo.data_classes import ElmoOutput
from spacy_elmo.extensions import restore_vector_hooks
from spacy_elmo.io import ModelFileError, load_allennlp
from spacy_elmo.pipeline import create_pipeline

# Runs in a fresh interpreter: spacy.load must find the component through the entry points.
# One torch thread as in the tests (conftest), so the float sums run in the same order.
LOAD_SCRIPT = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    import spacy
    import torch
    torch.set_num_threads(1)
    from spacy.tokens import Doc
    assert "spacy_elmo" not in sys.modules
    nlp = spacy.load(sys.argv[1])
    sentences = json.loads(open(sys.argv[2], encoding="utf-8").read())
    docs = nlp.pipe(Doc(nlp.vocab, words=words) for words in sentences)
    np.savez(sys.argv[3], *[doc._.elmo.layers for doc in docs])
    """
)


def _layers(nlp, sentences):
    return [doc._.elmo.layers for doc in nlp.pipe(Doc(nlp.vocab, words=w) for w in sentences)]


def test_saved_pipeline_runs_in_fresh_process_without_the_hdf5(tiny_paths, tiny_sentences, tmp_path):
    """Bitwise: the same weights, batches and thread count in both processes."""
    options = shutil.copy(tiny_paths[0], tmp_path / "options.json")
    weights = shutil.copy(tiny_paths[1], tmp_path / "weights.hdf5")
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo")
    nlp.config["initialize"]["components"]["elmo"] = {"options": str(options), "weights": str(weights)}
    nlp.initialize()
    expected = _layers(nlp, tiny_sentences)
    nlp.to_disk(tmp_path / "pipeline")
    (tmp_path / "weights.hdf5").unlink()
    (tmp_path / "options.json").unlink()
    (tmp_path / "sentences.json").write_text(json.dumps(tiny_sentences), encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "-c", LOAD_SCRIPT, *(str(tmp_path / n) for n in ("pipeline", "sentences.json", "out.npz"))],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    with np.load(tmp_path / "out.npz") as loaded:
        for i, layers in enumerate(expected):
            np.testing.assert_array_equal(loaded[f"arr_{i}"], layers)


def test_to_disk_from_disk_is_exact_and_keeps_a_model_directory(tiny_paths, tiny_sentences, tmp_path):
    """Bitwise where both pipelines run the same batches with the same char-cache history."""
    nlp = create_pipeline(load_allennlp(*tiny_paths), config={"mix_weights": [0.5, 0.0, 1.0], "gamma": 2.0})
    nlp.to_disk(tmp_path)
    loaded = spacy.load(tmp_path)
    for a, b in zip(_layers(nlp, tiny_sentences), _layers(loaded, tiny_sentences)):
        np.testing.assert_array_equal(a, b)
    doc_a, doc_b = nlp("a bank"), loaded("a bank")
    np.testing.assert_array_equal(doc_a[1]._.elmo, doc_b[1]._.elmo)
    # initializing a loaded pipeline (e.g. to add a downstream component) keeps the weights; its
    # outputs may differ by rounding (doc_a's tokens came from nlp's cache, encoded in other batches)
    weights = {k: v.clone() for k, v in loaded.get_pipe("elmo").bilm.state_dict().items()}
    loaded.initialize()
    assert all(torch.equal(v, weights[k]) for k, v in loaded.get_pipe("elmo").bilm.state_dict().items())
    np.testing.assert_allclose(loaded("a bank")._.elmo.layers, doc_a._.elmo.layers, atol=1e-6, rtol=0)
    # the component's weights are a spacy-elmo model directory any tool can load
    bilm = load_bilm(tmp_path / "elmo" / "model")
    # the component runs it optimized for inference (rounding-level changes; DESIGN: same to 1e-5)
    np.testing.assert_allclose(bilm.embed([tiny_sentences[0]])[0], _layers(nlp, tiny_sentences[:1])[0], atol=1e-5)


def test_a_pipeline_saved_with_bilm_v1_loads_and_predicts_as_before(tiny_paths, tiny_sentences, tmp_path):
    """Pipelines saved before spacy-elmo.BiLM.v2 take the inference settings from the component's
    arguments, as they did: bitwise what a v2 model with the same settings predicts."""
    settings = {"optimize": True, "precision": "fp16", "char_cache_size": 77}
    v1 = spacy.blank("en")
    model = {"@architectures": "spacy-elmo.BiLM.v1", **bilm_shape(load_allennlp(*tiny_paths).config)}
    v1.add_pipe("elmo", config={"model": model, **settings}).use_bilm(load_allennlp(*tiny_paths))
    expected = _layers(v1, tiny_sentences)
    v1.to_disk(tmp_path)
    loaded = spacy.load(tmp_path)
    elmo = loaded.get_pipe("elmo")
    assert loaded.config["components"]["elmo"]["model"]["@architectures"] == "spacy-elmo.BiLM.v1"
    assert (elmo.optimize, elmo.precision, elmo.char_cache_size) == (True, "fp16", 77)
    v2 = create_pipeline(load_allennlp(*tiny_paths), config={"model": settings})
    for a, b, c in zip(_layers(loaded, tiny_sentences), expected, _layers(v2, tiny_sentences)):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(a, c)
    assert elmo.bilm.forward_lstm.layers[1].projection.precision.name == "fp16"
    assert elmo.bilm.runner.char_cache.max_size == 77


def test_initialize_from_a_saved_pipeline_or_model_directory(tiny_paths, tmp_path):
    """Bitwise: each pipeline's first call, on the same text, with empty char caches."""
    nlp = create_pipeline(load_allennlp(*tiny_paths))
    nlp.to_disk(tmp_path / "pipeline")
    expected = nlp("one more text")._.elmo.layers
    for source in (tmp_path / "pipeline", tmp_path / "pipeline" / "elmo" / "model"):
        other = spacy.blank("en")
        other.add_pipe("elmo").initialize(lambda: [], model=source)
        np.testing.assert_array_equal(other("one more text")._.elmo.layers, expected)


def test_to_bytes_from_bytes_rebuilds_the_stored_shape(tiny_paths, tiny_sentences):
    nlp = create_pipeline(load_allennlp(*tiny_paths))
    data = nlp.to_bytes()
    # a pipeline from the default config (the large default shape) takes the stored shape
    fresh = spacy.blank("en")
    fresh.add_pipe("elmo")
    fresh.from_bytes(data)
    assert fresh.get_pipe("elmo").bilm.config == nlp.get_pipe("elmo").bilm.config
    for a, b in zip(_layers(nlp, tiny_sentences), _layers(fresh, tiny_sentences)):
        np.testing.assert_array_equal(a, b)
    again = load_model_from_config(nlp.config, auto_fill=True).from_bytes(data)
    # nlp's char cache holds encodings computed in other batches (rounding level)
    np.testing.assert_allclose(_layers(again, tiny_sentences[:1])[0], _layers(nlp, tiny_sentences[:1])[0], atol=1e-5)


def test_component_bytes_exclude_and_unitialized_state(tiny_paths):
    nlp = create_pipeline(load_allennlp(*tiny_paths))
    elmo_bytes = nlp.get_pipe("elmo").to_bytes()
    other = spacy.blank("en")
    elmo = other.add_pipe("elmo")
    elmo.from_bytes(elmo_bytes, exclude=["model"])
    # without the model's bytes the component keeps what its model held: nothing loaded yet
    assert elmo.cfg["has_weights"] and elmo.bilm.config == UNLOADED
    elmo.from_bytes(elmo_bytes)
    assert elmo.bilm.config.projection_dim == 16
    assert other("ok")._.elmo.width == 32


def test_damaged_saved_weights_are_refused(tiny_paths, tmp_path):
    create_pipeline(load_allennlp(*tiny_paths)).to_disk(tmp_path)
    weights = tmp_path / "elmo" / "model" / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0xFF
    weights.write_bytes(bytes(data))
    with pytest.raises(ModelFileError, match="checksum") as err:
        spacy.load(tmp_path)
    assert err.value.path == str(weights)


def test_doc_serialization_keeps_elmo(tiny_paths):
    nlp = create_pipeline(load_allennlp(*tiny_paths))
    doc = nlp("The bank by the river .")
    restored = Doc(nlp.vocab).from_bytes(doc.to_bytes())
    assert isinstance(restored._.elmo, ElmoOutput)
    np.testing.assert_array_equal(restored._.elmo.layers, doc._.elmo.layers)
    assert restored._.elmo.segments == doc._.elmo.segments
    np.testing.assert_array_equal(restored[1]._.elmo, doc[1]._.elmo)
    [from_bin] = DocBin(docs=[doc], store_user_data=True).get_docs(nlp.vocab)
    np.testing.assert_array_equal(from_bin._.elmo.layers, doc._.elmo.layers)


@pytest.mark.slow
def test_multiprocess_pipe_matches_single_process(tiny_paths, tiny_sentences):
    nlp = create_pipeline(load_allennlp(*tiny_paths))
    texts = [" ".join(words) for words in tiny_sentences]
    single = [doc._.elmo.layers for doc in nlp.pipe(texts)]
    multi = [doc._.elmo.layers for doc in nlp.pipe(texts, n_process=2, batch_size=4)]
    for a, b in zip(single, multi):
        np.testing.assert_allclose(a, b, atol=1e-5)  # other batches: float sums in another order
    hooked = create_pipeline(load_allennlp(*tiny_paths), config={"set_vector_hooks": True})
    for doc in restore_vector_hooks(hooked.pipe(texts[:2], n_process=2)):
        np.testing.assert_allclose(doc[0].vector, doc[0]._.elmo, atol=0)


@pytest.mark.filterwarnings("ignore:\\[W109\\]")  # spaCy: "Unable to save user hooks" (what this is about)
def test_vector_hooks_come_back_after_serialization(tiny_paths):
    nlp = create_pipeline(load_allennlp(*tiny_paths), config={"set_vector_hooks": True})
    doc = nlp("The bank by the river .")
    assert doc._.elmo.vector_hooks
    restored = Doc(nlp.vocab).from_bytes(doc.to_bytes())
    [from_bin] = DocBin(docs=[doc], store_user_data=True).get_docs(nlp.vocab)
    for lost in (restored, from_bin):
        assert lost[1].vector.shape != doc[1].vector.shape  # spaCy drops hooks: static (empty) vectors
    for back in restore_vector_hooks([restored, from_bin]):
        np.testing.assert_array_equal(back[1].vector, doc[1].vector)
        assert back[1].similarity(back[4]) == pytest.approx(doc[1].similarity(doc[4]))
        np.testing.assert_allclose(back.vector, doc.vector, atol=1e-6)
    # Docs whose component did not set hooks (or that never ran ELMo) are left as they are
    plain = create_pipeline(load_allennlp(*tiny_paths))("The bank")
    assert not plain._.elmo.vector_hooks
    [same] = restore_vector_hooks([Doc(nlp.vocab).from_bytes(plain.to_bytes())])
    assert "vector" not in same.user_token_hooks
    [untouched] = restore_vector_hooks([nlp.make_doc("no elmo here")])
    assert untouched._.elmo is None and not untouched.user_token_hooks


FORKED_WORKERS_SCRIPT = """
import json, sys
import spacy, torch
from spacy.language import Language

torch.set_num_threads(2)


@Language.component("record_threads")
def record_threads(doc):
    doc.user_data["torch_threads"] = torch.get_num_threads()
    return doc


if __name__ == "__main__":
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo")  # the shipped model: large enough for multi-threaded products
    nlp.add_pipe("record_threads")
    nlp.initialize()
    nlp("I deposited cash at the bank .")  # this process uses torch's thread pool before forking
    docs = list(nlp.pipe(["a river bank", "the bank raised its rates"] * 4, n_process=2, batch_size=2))
    print(json.dumps({
        "docs": len(docs),
        "annotated": sum(doc._.elmo is not None for doc in docs),
        "worker_threads": sorted({doc.user_data["torch_threads"] for doc in docs}),
        "parent_threads": torch.get_num_threads(),
    }))
"""


@pytest.mark.slow
def test_forked_workers_after_a_multithreaded_call_do_not_hang(tmp_path):
    # GNU OpenMP's pool does not survive fork: before the guard this waited forever in the workers
    script = tmp_path / "forked_workers.py"
    script.write_text(FORKED_WORKERS_SCRIPT, encoding="utf-8")
    process = subprocess.Popen(
        [sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
    )
    try:
        out, err = process.communicate(timeout=240)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)  # the workers too
        process.communicate()
        pytest.fail("nlp.pipe(n_process=2) hung after a multi-threaded nlp() call")
    assert process.returncode == 0, err.decode()[-2000:]
    result = json.loads(out.decode().strip().splitlines()[-1])
    assert result == {"docs": 8, "annotated": 8, "worker_threads": [1], "parent_threads": 2}
