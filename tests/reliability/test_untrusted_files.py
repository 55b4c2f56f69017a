"""Untrusted files: nothing we load unpickles, and hostile or odd content is refused
with an error naming the file.

Each pickle payload would create a marker file if anything unpickled it; the tests put it where
weights, configs and arrays are read and check the marker never appears.
"""
import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest
import spacy
import srsly
import torch
from spacy.tokens import DocBin

from spacy_elmo import load_bilm, save_bilm
from spacy_elmo.io import ModelFileError, load_allennlp
from spacy_elmo.io.native import CONFIG_NAME, WEIGHTS_NAME
from spacy_elmo.pipeline import create_pipeline

from ..conftest import TINY, random_bilm
from spacy_elmo.training.checkpoints import LM_NAME, STATE_NAME, TRAINING_NAME, latest_checkpoint, list_checkpoints
from spacy_elmo.training.checkpoints import read_checkpoint
from spacy_elmo.training.model_dir import SOFTMAX_NAME, load_lm_parts

from .tiny_training import run, tiny_config, write_corpus
from .untrusted import PACKAGE, payloads, unpickling_calls

OPTIONS, WEIGHTS = TINY / "options.json", TINY / "weights.hdf5"


@pytest.fixture(scope="module")
def training_run(tmp_path_factory):
    """A real 4-step pretraining run: checkpoints at steps 2 and 4, model-last."""
    path = tmp_path_factory.mktemp("training")
    run(tiny_config(write_corpus(path / "train.txt", lines=60), max_steps=4, checkpoint_frequency=2), path / "run")
    return path / "run"


@pytest.fixture(scope="module")
def saved_pipeline(tmp_path_factory):
    path = tmp_path_factory.mktemp("pipeline")
    create_pipeline(load_allennlp(OPTIONS, WEIGHTS)).to_disk(path)
    return path


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def test_package_source_never_unpickles():
    sources = sorted(PACKAGE.rglob("*.py"))
    assert len(sources) > 30
    found = [hit for path in sources for hit in unpickling_calls(path.read_text("utf-8"), str(path))]
    assert found == []


def test_the_source_scan_finds_what_it_looks_for():
    bad = (
        "import pickle\nfrom dill import loads\nimport torch, numpy as np\nfrom torch import load\n"
        "torch.load(f)\ntorch.load(f, weights_only=False)\nnp.load(p, allow_pickle=True)\neval(s)\n"
        "torch.jit.load(p)\n"
    )
    good = (
        "# import pickle\n'''torch.load(f)'''\nimport torch, numpy as np\ntorch.load(f, weights_only=True)\n"
        "np.load(p)\nnp.load(p, allow_pickle=False)\nmodel.eval()\n"
    )
    assert [int(hit.split(":")[1]) for hit in unpickling_calls(bad)] == [1, 2, 4, 5, 6, 7, 8, 9]
    assert unpickling_calls(good) == []


@pytest.mark.parametrize("remove_checksum", [False, True])
def test_pickle_in_place_of_the_pipeline_weights(saved_pipeline, tmp_path, remove_checksum):
    marker = tmp_path / "marker"
    for name, payload in payloads(marker).items():
        path = _copy(saved_pipeline, tmp_path / name)
        weights = path / "elmo" / "model" / WEIGHTS_NAME
        weights.write_bytes(payload)
        if remove_checksum:  # an attacker who edits config.json too: the format itself must refuse
            config_path = path / "elmo" / "model" / CONFIG_NAME
            config = json.loads(config_path.read_text())
            config["weights_sha256"] = hashlib.sha256(payload).hexdigest()
            config_path.write_text(json.dumps(config))
        problem = "safetensors" if remove_checksum else "checksum mismatch"
        with pytest.raises(ModelFileError, match=problem) as err:
            spacy.load(path)
        assert err.value.path == str(weights), name
        assert not marker.exists(), name


def test_pickle_in_place_of_the_component_cfg_and_bytes(saved_pipeline, tmp_path):
    marker = tmp_path / "marker"
    nlp = spacy.load(saved_pipeline)
    elmo = nlp.get_pipe("elmo")
    good = srsly.msgpack_loads(elmo.to_bytes())
    for name, payload in payloads(marker).items():
        path = _copy(saved_pipeline, tmp_path / name)
        (path / "elmo" / "cfg").write_bytes(payload)
        with pytest.raises(ValueError):
            spacy.load(path)
        with pytest.raises(ModelFileError, match="safetensors") as err:
            elmo.from_bytes(srsly.msgpack_dumps({**good, "model": payload}))
        assert "bytes of the 'elmo' component" in str(err.value)
        assert not marker.exists(), name
    assert np.isfinite(nlp("still works")._.elmo.layers).all()


def test_pickle_in_place_of_an_npy_the_pipeline_reads(saved_pipeline, tmp_path):
    # spaCy reads the vocab's vectors as .npy when our pipelines load: numpy must refuse pickles
    marker = tmp_path / "marker"
    path = _copy(saved_pipeline, tmp_path / "npy")
    (path / "vocab" / "vectors").write_bytes(payloads(marker)["npy-object"])
    with pytest.raises(ValueError, match="allow_pickle"):
        spacy.load(path)
    assert not marker.exists()


def test_pickle_in_place_of_native_and_hdf5_weights(tmp_path):
    marker = tmp_path / "marker"
    for name, payload in payloads(marker).items():
        model = save_bilm(random_bilm(), tmp_path / name)
        (model / WEIGHTS_NAME).write_bytes(payload)
        with pytest.raises(ModelFileError, match="checksum") as err:
            load_bilm(model)
        assert err.value.path == str(model / WEIGHTS_NAME)
        hdf5 = tmp_path / f"{name}.hdf5"
        hdf5.write_bytes(payload)
        with pytest.raises(ModelFileError, match="not a readable HDF5") as err:
            load_allennlp(OPTIONS, hdf5)
        assert err.value.path == str(hdf5)
        options = tmp_path / f"{name}.json"
        options.write_bytes(payload)
        with pytest.raises(ModelFileError, match="options") as err:
            load_allennlp(options, WEIGHTS)
        assert err.value.path == str(options)
        assert not marker.exists(), name


def _with_checksums(checkpoint: Path) -> None:
    # the attacker rewrites state.json so that the checksums match the payloads
    state = json.loads((checkpoint / STATE_NAME).read_text())
    for name in (LM_NAME, TRAINING_NAME):
        state["sha256"][name] = hashlib.sha256((checkpoint / name).read_bytes()).hexdigest()
    (checkpoint / STATE_NAME).write_text(json.dumps(state))


@pytest.mark.parametrize("target", [LM_NAME, TRAINING_NAME, STATE_NAME])
def test_pickle_in_a_training_checkpoint(training_run, tmp_path, target):
    marker = tmp_path / "marker"
    for name, payload in payloads(marker).items():
        checkpoints = _copy(training_run / "checkpoints", tmp_path / name)
        newest = list_checkpoints(checkpoints)[-1]
        (newest / target).write_bytes(payload)
        if target != STATE_NAME:
            _with_checksums(newest)
        with pytest.raises(ValueError) as err:
            read_checkpoint(newest)
        assert not marker.exists(), name
        assert target in str(err.value), f"the error must name the file: {err.value}"
        with pytest.warns(RuntimeWarning, match=str(newest)):
            previous = latest_checkpoint(checkpoints)
        assert previous is not None and previous.step == 2
        assert not marker.exists(), name


@pytest.mark.parametrize("target", [WEIGHTS_NAME, SOFTMAX_NAME])
def test_pickle_in_a_trained_model_directory(training_run, tmp_path, target):
    marker = tmp_path / "marker"
    for name, payload in payloads(marker).items():
        model = _copy(training_run / "model-last", tmp_path / name)
        (model / target).write_bytes(payload)
        config = json.loads((model / CONFIG_NAME).read_text())
        key = "weights_sha256" if target == WEIGHTS_NAME else None
        if key:
            config[key] = hashlib.sha256(payload).hexdigest()
        else:
            config["extra"]["softmax_sha256"] = hashlib.sha256(payload).hexdigest()
        (model / CONFIG_NAME).write_text(json.dumps(config))
        with pytest.raises(ValueError) as err:
            load_lm_parts(model)
        assert not marker.exists(), name
        assert isinstance(err.value, ModelFileError) and err.value.path == str(model / target), name
        assert not marker.exists(), name


def test_object_array_in_doc_user_data_never_unpickles(tmp_path):
    # Doc.from_bytes (DocBin, nlp.pipe(n_process=...)) msgpack-decodes doc.user_data, where
    # doc._.elmo lives: an object-dtype array there must not become Python objects
    marker = tmp_path / "marker"
    honest = {b"nd": True, b"type": "<f4", b"kind": b"", b"shape": (2,), b"data": np.ones(2, "f4").tobytes()}
    assert srsly.msgpack_loads(srsly.msgpack_dumps({"layers": honest}))["layers"].tolist() == [1.0, 1.0]
    hostile = {**honest, b"type": "|O", b"shape": (1,), b"data": payloads(marker)["pickle-5"]}
    with pytest.raises(ValueError, match="OBJECT"):
        srsly.msgpack_loads(srsly.msgpack_dumps({"layers": hostile}))
    assert not marker.exists()


def _edited_hdf5(tmp_path: Path, edit) -> Path:
    path = tmp_path / "weights.hdf5"
    shutil.copy(WEIGHTS, path)
    with h5py.File(path, "a") as handle:
        edit(handle)
    return path


def _replace(name: str, value):
    def edit(handle):
        del handle[name]
        handle[name] = value

    return edit


@pytest.mark.filterwarnings("ignore:overflow encountered in cast")
def test_hdf5_content_that_is_not_a_float_dataset_is_refused(tmp_path):
    def group(handle):
        del handle["CNN_proj/b_proj"]
        handle.create_group("CNN_proj/b_proj")

    def nan(handle):
        handle["CNN_proj/b_proj"][3] = np.nan

    def overflow(handle):  # finite in float64, infinite once read as float32
        _replace("CNN_proj/b_proj", np.full(16, 1e300))(handle)

    cases = {
        "group": (group, "'CNN_proj/b_proj' is missing"),
        "nan": (nan, "'CNN_proj/b_proj' holds NaN"),
        "inf": (lambda h: h["char_embed"].__setitem__((0, 0), np.inf), "'char_embed' holds NaN"),
        "overflow": (overflow, "holds NaN or infinite"),
        "bytes": (_replace("CNN_proj/b_proj", np.array([b"x"] * 16)), "dtype"),
        "complex": (_replace("CNN_proj/b_proj", np.zeros(16, np.complex64)), "dtype"),
        "scalar": (_replace("CNN_proj/b_proj", 1.0), r"shape \(\)"),
        "transposed": (_replace("CNN_proj/W_proj", np.zeros((16, 32), np.float32)), "shape"),
    }
    for name, (edit, problem) in cases.items():
        (tmp_path / name).mkdir()
        path = _edited_hdf5(tmp_path / name, edit)
        with pytest.raises(ModelFileError, match=problem) as err:
            load_allennlp(OPTIONS, path)
        assert err.value.path == str(path), name


def test_hdf5_links_and_outside_storage_are_refused(tmp_path):
    # an untrusted weights file must not make the loader read other files on this machine
    other = tmp_path / "other.hdf5"
    with h5py.File(other, "w") as handle:
        handle["x"] = np.zeros(16, np.float32)
    secret = tmp_path / "secret.bin"
    secret.write_bytes(np.ones(16, np.float32).tobytes())

    def virtual(handle):
        layout = h5py.VirtualLayout(shape=(16,), dtype="f4")
        layout[:] = h5py.VirtualSource(str(other), "x", shape=(16,))
        del handle["CNN_proj/b_proj"]
        handle.create_virtual_dataset("CNN_proj/b_proj", layout, fillvalue=0)

    def external_storage(handle):
        del handle["CNN_proj/b_proj"]
        handle.create_dataset("CNN_proj/b_proj", shape=(16,), dtype="f4", external=[(str(secret), 0, 64)])

    def linked_group(handle):
        with h5py.File(other, "a") as target:
            target.copy(handle["CNN_proj"], "CNN_proj")
        del handle["CNN_proj"]
        handle["CNN_proj"] = h5py.ExternalLink(str(other), "/CNN_proj")

    cases = {
        "external_link": _replace("CNN_proj/b_proj", h5py.ExternalLink(str(other), "/x")),
        "external_link_to_non_hdf5": _replace("CNN_proj/b_proj", h5py.ExternalLink(str(secret), "/x")),
        "dangling_soft_link": _replace("CNN_proj/b_proj", h5py.SoftLink("/nowhere")),
        "linked_group": linked_group,
        "virtual": virtual,
        "external_storage": external_storage,
    }
    for name, edit in cases.items():
        (tmp_path / name).mkdir()
        path = _edited_hdf5(tmp_path / name, edit)
        with pytest.raises(ModelFileError, match="CNN_proj") as err:
            load_allennlp(OPTIONS, path)
        assert err.value.path == str(path), name


def test_native_weights_that_are_not_finite_are_refused(tmp_path):
    bilm = random_bilm()
    with torch.no_grad():
        bilm.token_encoder.projection.bias[0] = float("nan")
    save_bilm(bilm, tmp_path)
    with pytest.raises(ModelFileError, match="NaN") as err:
        load_bilm(tmp_path)
    assert err.value.path == str(tmp_path / WEIGHTS_NAME)


@pytest.mark.slow
def test_loading_every_kind_of_file_never_unpickles(saved_pipeline, training_run, tmp_path):
    """A fresh process loads each file kind with an audit hook on "pickle.find_class"."""
    nlp = spacy.load(saved_pipeline)
    (tmp_path / "component.bin").write_bytes(nlp.get_pipe("elmo").to_bytes())
    (tmp_path / "docs.spacy").write_bytes(DocBin(docs=[nlp("some words")], store_user_data=True).to_bytes())
    manifest = {
        "pipeline": str(saved_pipeline),
        "native": str(save_bilm(random_bilm(), tmp_path / "native")),
        "allennlp": [str(OPTIONS), str(WEIGHTS)],
        "component_bytes": str(tmp_path / "component.bin"),
        "docbin": str(tmp_path / "docs.spacy"),
        "checkpoint": str(list_checkpoints(training_run / "checkpoints")[-1]),
        "lm_dir": str(training_run / "model-last"),
    }
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    script = Path(__file__).parent / "audit_loading.py"
    done = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "manifest.json")], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    events = json.loads(done.stdout.strip().splitlines()[-1])
    assert events.pop("self_check"), "the audit hook saw no unpickling at all"
    assert set(events) == set(manifest)
    assert events == {kind: [] for kind in manifest}
