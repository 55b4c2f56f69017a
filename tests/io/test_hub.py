"""Models on the Hugging Face Hub (``hf:OWNER/REPO[@REV]``), fetched from a local Hub on 127.0.0.1
(``hub_server``) through huggingface_hub: by ``load_bilm``, the component's model name and the
``download`` command; each file checked against the listing before it is read; a bad file refused
in one line with nothing left in the cache; offline mode honoured."""
import json
from pathlib import Path

import pytest
import spacy
import torch
from typer.testing import CliRunner

from spacy_elmo import load_bilm
from spacy_elmo.cli.main import app
from spacy_elmo.io import ModelFileError, save_bilm
from spacy_elmo.io.hub import parse_hub_id
from spacy_elmo.io.loading import locate_bilm

from ..conftest import TINY, load_tiny_bilm, random_bilm
from .hub_server import FAULTS, HubServer

pytest.importorskip("huggingface_hub")

PAIR = {"options.json": (TINY / "options.json").read_bytes(), "weights.hdf5": (TINY / "weights.hdf5").read_bytes(),
        "README.md": b"# a tiny biLM\n", ".gitattributes": b"*.hdf5 filter=lfs\n"}


@pytest.fixture()
def hub(monkeypatch, tmp_path):
    """A local Hub that HF_ENDPOINT points at, with an empty cache of its own."""
    with HubServer() as server:
        monkeypatch.setenv("HF_ENDPOINT", server.endpoint)
        monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-cache"))
        monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
        monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
        server.cache = tmp_path / "hf-cache"
        yield server


def _same_weights(a, b) -> bool:
    return a.state_dict().keys() == b.state_dict().keys() and all(
        torch.equal(a.state_dict()[k], b.state_dict()[k]) for k in a.state_dict())


def _cached_files(cache: Path) -> list:
    return sorted(str(p.relative_to(cache)) for p in cache.rglob("*") if p.is_file() or p.is_symlink()) \
        if cache.exists() else []


def test_a_published_pair_on_the_hub_loads_by_its_id_as_from_a_folder_and_only_its_two_files_are_fetched(hub):
    commit = hub.add("allenai/tiny-elmo", PAIR)
    bilm = load_bilm("hf:allenai/tiny-elmo", optimize=False)
    assert _same_weights(bilm, load_tiny_bilm())
    fetched = {path.rsplit("/", 1)[-1] for method, path in hub.requests if method == "GET" and "/resolve/" in path}
    assert fetched == {"options.json", "weights.hdf5"}
    source = locate_bilm("hf:allenai/tiny-elmo")
    assert source.name == "hf:allenai/tiny-elmo" and source.version() == commit
    assert "hf:allenai/tiny-elmo" in source.description and source.files()[0].name == "weights.hdf5"


def test_our_safetensors_directory_on_the_hub_loads_at_a_named_revision(hub, tmp_path):
    model = random_bilm(seed=3)
    save_bilm(model, tmp_path / "ours")
    hub.add("someone/our-elmo", {p.name: p.read_bytes() for p in (tmp_path / "ours").iterdir() if p.is_file()})
    loaded = load_bilm("hf:someone/our-elmo@v1.0", optimize=False)
    assert _same_weights(loaded, model)
    assert ("GET", "/api/models/someone/our-elmo/revision/v1.0") in hub.requests


def test_the_component_takes_a_hub_id_as_its_model_name(hub):
    hub.add("allenai/tiny-elmo", PAIR)
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config={"model": {"name": "hf:allenai/tiny-elmo"}})
    nlp.initialize()
    doc = nlp("The bank by the river .")
    assert doc._.elmo.layers.shape[:2] == (3, 6)


def test_offline_mode_reads_the_cache_without_a_request_and_refuses_what_it_does_not_hold(hub, monkeypatch):
    hub.add("allenai/tiny-elmo", PAIR)
    load_bilm("hf:allenai/tiny-elmo@main", optimize=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    asked = len(hub.requests)
    assert _same_weights(load_bilm("hf:allenai/tiny-elmo", optimize=False), load_tiny_bilm())
    assert len(hub.requests) == asked
    with pytest.raises(ModelFileError, match="HF_HUB_OFFLINE") as refused:
        load_bilm("hf:allenai/other-elmo")
    assert "\n" not in str(refused.value) and len(hub.requests) == asked


def test_offline_a_cached_file_changed_since_it_was_fetched_is_refused(hub, monkeypatch):
    hub.add("allenai/tiny-elmo", PAIR)
    source = locate_bilm("hf:allenai/tiny-elmo")
    blob = source.files()[0].resolve()
    blob.write_bytes(blob.read_bytes()[:-1] + b"\0")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelFileError, match="not the .* it was fetched with") as refused:
        load_bilm("hf:allenai/tiny-elmo")
    assert "spacy_elmo download hf:allenai/tiny-elmo" in str(refused.value)


def test_offline_a_file_whose_blob_was_deleted_from_the_cache_is_refused_not_left_out(hub, monkeypatch):
    hub.add("allenai/tiny-elmo", PAIR)
    weights = locate_bilm("hf:allenai/tiny-elmo").files()[0]
    weights.resolve().unlink()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelFileError, match="no longer in the cache") as refused:
        load_bilm("hf:allenai/tiny-elmo")
    assert str(weights) in str(refused.value) and "\n" not in str(refused.value)


@pytest.mark.parametrize("link_removed", [False, True])
def test_online_a_cached_file_damaged_since_it_was_fetched_is_fetched_again_with_a_line(hub, capsys, link_removed):
    hub.add("allenai/tiny-elmo", PAIR)
    weights = locate_bilm("hf:allenai/tiny-elmo").files()[0]
    blob = weights.resolve()
    blob.write_bytes(blob.read_bytes()[:-1] + b"\0")
    if link_removed:  # the damaged blob stays: huggingface_hub would link it again without a request
        weights.unlink()
    capsys.readouterr()
    assert _same_weights(load_bilm("hf:allenai/tiny-elmo", optimize=False), load_tiny_bilm())
    assert "fetching it again" in capsys.readouterr().err
    assert blob.read_bytes() == PAIR["weights.hdf5"]


@pytest.mark.parametrize("fault", FAULTS)
@pytest.mark.parametrize("name", ["weights.hdf5", "options.json"])
def test_a_bad_file_from_the_hub_is_refused_in_one_line_and_leaves_the_cache_as_it_was(hub, fault, name):
    hub.add("allenai/first", PAIR)
    load_bilm("hf:allenai/first", optimize=False)  # the cache holds another model already
    before = _cached_files(hub.cache)
    hub.add("allenai/tiny-elmo", PAIR)
    hub.faults[("allenai/tiny-elmo", name)] = fault
    with pytest.raises(ModelFileError) as refused:
        load_bilm("hf:allenai/tiny-elmo")
    message = str(refused.value)
    assert "\n" not in message and f"hf:allenai/tiny-elmo/{name}" in message and "nothing was kept" in message
    expected = {"wrong-checksum": "the Hub states", "truncated": "size", "missing": "404"}[fault]
    assert expected in message
    assert _cached_files(hub.cache) == before
    del hub.faults[("allenai/tiny-elmo", name)]  # served correctly now: it loads
    assert _same_weights(load_bilm("hf:allenai/tiny-elmo", optimize=False), load_tiny_bilm())


def test_a_repository_that_is_not_there_or_holds_no_model_is_one_line(hub):
    hub.add("allenai/readme-only", {"README.md": b"# nothing\n"})
    for name, words in (("hf:allenai/absent", "did not list it"), ("hf:allenai/readme-only", "no model files")):
        with pytest.raises(ModelFileError, match=words) as refused:
            load_bilm(name)
        assert "\n" not in str(refused.value)
    assert _cached_files(hub.cache) == []


@pytest.mark.parametrize("text", ["hf:", "hf:no-owner", "hf:a/b/c", "hf:a/b@", "hf:../x"])
def test_a_malformed_hub_id_says_how_to_write_one(text):
    with pytest.raises(ModelFileError, match="hf:OWNER/REPO"):
        parse_hub_id(text)


def test_parsing_keeps_the_revision(hub):
    assert parse_hub_id("hf:a/b@v2").revision == "v2" and parse_hub_id("hf:a/b").revision is None


def test_the_download_command_fetches_a_hub_id_and_refuses_a_bad_file_in_one_line(hub):
    hub.add("allenai/tiny-elmo", PAIR)
    runner = CliRunner()
    done = runner.invoke(app, ["download", "hf:allenai/tiny-elmo"])
    assert done.exit_code == 0, done.output
    assert "Verified" in done.output and str(hub.cache) in done.output
    hub.add("allenai/bad-elmo", PAIR)
    hub.faults[("allenai/bad-elmo", "weights.hdf5")] = "wrong-checksum"
    failed = runner.invoke(app, ["download", "hf:allenai/bad-elmo"])
    assert failed.exit_code == 1
    errors = [line for line in failed.output.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and "the Hub states" in errors[0]
    assert not (hub.cache / "models--allenai--bad-elmo").exists()


def test_the_download_command_writes_a_pipeline_from_a_hub_id_in_the_language_given(hub, tmp_path):
    hub.add("allenai/tiny-elmo", PAIR)
    unsaid = CliRunner().invoke(app, ["download", "hf:allenai/tiny-elmo", "--as-pipeline", "--output",
                                      str(tmp_path / "pipeline")])
    assert unsaid.exit_code == 1 and "--lang" in unsaid.output  # a pair records no language
    done = CliRunner().invoke(app, ["download", "hf:allenai/tiny-elmo", "--as-pipeline", "--lang", "en", "--output",
                                    str(tmp_path / "pipeline")])
    assert done.exit_code == 0, done.output
    nlp = spacy.load(tmp_path / "pipeline")
    assert nlp("A bank .")._.elmo.layers.shape[:2] == (3, 3)
    assert json.loads((tmp_path / "pipeline" / "meta.json").read_text())["lang"] == "en"


def test_a_spacy_pipeline_uploaded_as_its_folder_loads_from_the_hub_with_its_nested_weights(hub, tmp_path, monkeypatch):
    from spacy_elmo.pipeline import create_pipeline

    model = random_bilm(seed=4)
    create_pipeline(model, lang="en").to_disk(tmp_path / "pipeline")
    folder = tmp_path / "pipeline"
    hub.add("someone/en_elmo", {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()})
    assert _same_weights(load_bilm("hf:someone/en_elmo", optimize=False), model)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # offline, every file of it is checked again, the nested ones too
    assert _same_weights(load_bilm("hf:someone/en_elmo", optimize=False), model)


def test_without_huggingface_hub_a_hub_id_says_which_extra_installs_it(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "huggingface_hub", None)  # as if not installed: its import fails
    with pytest.raises(ModelFileError, match=r"pip install 'spacy-elmo\[hub\]'"):
        load_bilm("hf:allenai/tiny-elmo")


def test_where_the_hub_cannot_be_reached_a_revision_fetched_before_is_read_from_the_cache_with_a_line(
        hub, monkeypatch, capsys):
    hub.add("allenai/tiny-elmo", PAIR)
    load_bilm("hf:allenai/tiny-elmo", optimize=False)
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens there: no answer at all
    capsys.readouterr()
    assert _same_weights(load_bilm("hf:allenai/tiny-elmo", optimize=False), load_tiny_bilm())
    assert "cannot be reached" in capsys.readouterr().err
    with pytest.raises(ModelFileError, match="did not list it") as refused:  # nothing fetched before: an error
        load_bilm("hf:allenai/other-elmo")
    assert "\n" not in str(refused.value)
