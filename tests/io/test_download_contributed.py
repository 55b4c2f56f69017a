"""Contributed models in AllenNLP's format by name: pairs in AllenNLP's bucket and archives with the
pair in a folder (SeqVec's zip, the clinical and Slovenian .tar.gz), from a local server."""
import io
import json
import tarfile
import zipfile
from pathlib import Path

import numpy as np
import pytest

from spacy_elmo import load_bilm
from spacy_elmo.io import ModelFileError, load_allennlp
from spacy_elmo.io.contributed import fetch_contributed, pipeline_refusal, protein_residues
from spacy_elmo.io.download import Transfer
from spacy_elmo.io.loading import locate_bilm
from spacy_elmo.io.registry import (
    BASE_URL_ENV, CONTRIBUTED_BASE_URL_ENV, DEFAULT_BASE_URL, PUBLISHED_CONTRIBUTED, PUBLISHED_MODELS, published_names,
)

from .test_download import FAST, FixtureServer

ROOT = Path(__file__).parents[2]
SEQVEC = ROOT / "tests" / "data" / "contributed" / "seqvec" / "uniref50_v2"
OPTIONS = (SEQVEC / "options.json").read_bytes()
WEIGHTS = (SEQVEC / "weights.hdf5").read_bytes()
ARCHIVES = sorted(name for name, model in PUBLISHED_CONTRIBUTED.items() if model.archive)
PAIRS = sorted(name for name, model in PUBLISHED_CONTRIBUTED.items() if not model.archive)
PROTEINS = ["MKTAYIAKQRQISFVKSHFSRQ", "SEQWENCE", "PROTEIN", "M"]


def published_archive(name: str, extra=(), weights: bytes = WEIGHTS) -> bytes:
    """The archive of registry entry ``name`` as published: its two members at their published
    paths (the fixture pair's bytes), in a zip or a .tar.gz as its URL says, with ``extra``
    (path, bytes) members beside them."""
    model = PUBLISHED_CONTRIBUTED[name]
    members = [(model.options_member, OPTIONS), (model.weights_member, weights), *extra]
    buffer = io.BytesIO()
    if model.archive_name.endswith(".zip"):
        with zipfile.ZipFile(buffer, "w") as archive:
            for path, data in members:
                archive.writestr(path, data)
        return buffer.getvalue()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        folder = tarfile.TarInfo(model.options_member.split("/")[0])
        folder.type = tarfile.DIRTYPE
        archive.addfile(folder)
        for path, data in members:
            info = tarfile.TarInfo(path)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


@pytest.fixture()
def contributed(monkeypatch, tmp_path):
    """A local server the contributed names point at (archives by file name, pairs below the
    AllenNLP base URL), plain http allowed, and a cache in the test's folder."""
    server = FixtureServer()
    monkeypatch.setenv(CONTRIBUTED_BASE_URL_ENV, server.base)
    monkeypatch.setenv(BASE_URL_ENV, server.base)
    monkeypatch.setenv("SPACY_ELMO_ALLOW_HTTP", "1")
    monkeypatch.setenv("SPACY_ELMO_CACHE", str(tmp_path / "cache"))
    yield server
    server.close()


pytestmark = pytest.mark.filterwarnings("ignore:.*downloading over plain http:RuntimeWarning")


def test_registry_entries_are_https_one_layout_each_and_pin_no_digest_nobody_published():
    assert ARCHIVES == ["clinical-mimic", "embeddia-sl", "seqvec"] and PAIRS == ["pt-brwac", "pt-wikipedia", "pubmed"]
    for name, model in PUBLISHED_CONTRIBUTED.items():
        assert name not in PUBLISHED_MODELS and name in published_names()
        assert not model.http_only
        # no publisher states a SHA-256: the first download's is recorded (docs/download.md)
        assert model.sha256 is model.options_sha256 is model.weights_sha256 is None
        assert (model.language is None) == (model.tokens == "residues")
        if model.archive:
            assert model.archive.startswith("https://") and model.options_path is model.weights_path is None
            assert model.options_member.endswith("/options.json") and model.weights_member.endswith(".hdf5")
            assert model.archive_url() == model.archive
        else:
            assert model.options_path.startswith("contributed/") and model.weights_path.endswith(".hdf5")
            assert model.weights_url() == DEFAULT_BASE_URL + model.weights_path
    assert PUBLISHED_CONTRIBUTED["seqvec"].archive == "https://rostlab.org/~deepppi/seqvec.zip"
    assert PUBLISHED_CONTRIBUTED["seqvec"].weights_member == "uniref50_v2/weights.hdf5"


def test_the_seqvec_fixture_folder_loads_as_published_and_as_its_zip(tmp_path):
    assert sorted(p.name for p in SEQVEC.iterdir()) == ["options.json", "weights.hdf5"]
    plain = load_allennlp(SEQVEC / "options.json", SEQVEC / "weights.hdf5")
    zipped = tmp_path / "seqvec.zip"
    zipped.write_bytes(published_archive("seqvec"))
    residues = [protein_residues(p) for p in PROTEINS]
    expected = plain.embed(residues)
    for bilm in (load_bilm(SEQVEC), load_bilm(zipped)):
        for got, want in zip(bilm.embed(residues), expected):
            np.testing.assert_allclose(got, want, atol=1e-5)


def test_seqvec_by_name_downloads_the_zip_once_and_embeds_residues_as_the_plain_path(contributed, tmp_path):
    contributed.files["seqvec.zip"] = published_archive("seqvec", extra=[("uniref50_v2/notes.txt", b"x")])
    bilm = load_bilm("seqvec")
    residues = [protein_residues(p) for p in PROTEINS]
    vectors = bilm.embed(residues)
    # one vector per residue, every layer: (char CNN + 2 LSTM layers, residues, 2 x projection)
    assert [v.shape for v in vectors] == [(3, len(p), 16) for p in PROTEINS]
    reference = load_allennlp(SEQVEC / "options.json", SEQVEC / "weights.hdf5").embed(residues)
    for got, want in zip(vectors, reference):
        np.testing.assert_allclose(got, want, atol=1e-5)
    folder = tmp_path / "cache" / "seqvec"
    assert (folder / "options.json").read_bytes() == OPTIONS and (folder / "weights.hdf5").read_bytes() == WEIGHTS
    assert (folder / "seqvec.zip.sha256.json").is_file() and not (folder / "notes.txt").exists()
    assert json.loads((folder / "extracted.json").read_text())["name"] == "seqvec"
    source = locate_bilm("seqvec")  # from the cache: no second request
    assert contributed.count("seqvec.zip") == 1 and source.language is None and source.files() == (folder / "weights.hdf5",)


@pytest.mark.parametrize("name", ARCHIVES)
def test_each_archive_layout_as_published_gives_the_pair(contributed, tmp_path, name):
    model = PUBLISHED_CONTRIBUTED[name]
    # the clinical archive also holds its training vocabulary, which the biLM does not need
    contributed.files[model.archive_name] = published_archive(name, extra=[("elmo/vocab.txt", b"<S>\n</S>\n")])
    options, weights = fetch_contributed(name, directory=tmp_path / name, transfer=Transfer(**FAST, progress=None))
    assert options.read_bytes() == OPTIONS and weights.read_bytes() == WEIGHTS
    assert sorted(p.name for p in (tmp_path / name).iterdir()) == sorted(
        ["options.json", "weights.hdf5", model.archive_name, model.archive_name + ".sha256.json", "extracted.json"]
    )
    assert locate_bilm(name).language == model.language


def test_a_copy_without_its_record_is_copied_out_again_from_the_kept_archive(contributed, tmp_path):
    contributed.files["slovenian-elmo.tar.gz"] = published_archive("embeddia-sl")
    folder = tmp_path / "sl"
    fetch_contributed("embeddia-sl", directory=folder)
    (folder / "weights.hdf5").write_bytes(b"damaged")  # the copy, not the archive: the record still matches
    (folder / "extracted.json").unlink()
    options, weights = fetch_contributed("embeddia-sl", directory=folder)
    assert weights.read_bytes() == WEIGHTS and contributed.count("slovenian-elmo.tar.gz") == 1


def test_an_archive_without_the_pair_or_with_a_link_is_refused_naming_what_it_holds(contributed, tmp_path):
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        info = tarfile.TarInfo("elmo/options.json")
        info.size = len(OPTIONS)
        archive.addfile(info, io.BytesIO(OPTIONS))
        link = tarfile.TarInfo("elmo/mimic_wiki.hdf5")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        archive.addfile(link)
    contributed.files["elmo.tar.gz"] = link_archive = buffer.getvalue()
    with pytest.raises(ModelFileError, match=r"member 'elmo/mimic_wiki.hdf5' is a link; a model archive holds files only"):
        fetch_contributed("clinical-mimic", directory=tmp_path / "c", transfer=Transfer(**FAST, progress=None))
    assert sorted(p.name for p in (tmp_path / "c").iterdir()) == []
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive, tarfile.open(fileobj=io.BytesIO(link_archive)) as linked:
        options = linked.getmember("elmo/options.json")
        archive.addfile(options, linked.extractfile(options))
    contributed.files["elmo.tar.gz"] = buffer.getvalue()
    with pytest.raises(ModelFileError, match=r"no member named mimic_wiki.hdf5 .*it holds elmo/options.json"):
        fetch_contributed("clinical-mimic", directory=tmp_path / "d", transfer=Transfer(**FAST, progress=None))
    contributed.files["seqvec.zip"] = published_archive("seqvec", weights=b"not hdf5")
    with pytest.raises(ModelFileError, match="uniref50_v2/weights.hdf5: ") as error:
        fetch_contributed("seqvec", directory=tmp_path / "s")
    assert error.value.path == str(tmp_path / "s" / "seqvec.zip")
    assert sorted(p.name for p in (tmp_path / "s").iterdir()) == ["seqvec.zip", "seqvec.zip.sha256.json"]


@pytest.mark.parametrize("name", PAIRS)
def test_allennlps_contributed_pairs_come_from_their_paths_in_the_bucket(contributed, name):
    model = PUBLISHED_CONTRIBUTED[name]
    contributed.files.update({model.options_path: OPTIONS, model.weights_path: WEIGHTS})
    source = locate_bilm(name)
    assert source.language == model.language and source.name == name
    assert source.files()[0].read_bytes() == WEIGHTS
    assert contributed.count(model.weights_path) == 1


def test_residues_are_letters_and_seqvec_gets_no_blank_pipeline(tmp_path):
    assert protein_residues("mkt ay\nIAx") == list("MKTAYIAX")
    for bad, message in (("MK7A", "'7' at position 2"), ("MKA*", r"'\*' at position 3"), (" \n", "empty")):
        with pytest.raises(ValueError, match=message):
            protein_residues(bad)
    assert "residues" in pipeline_refusal("seqvec") and "protein_residues" in pipeline_refusal("seqvec")
    assert pipeline_refusal("pubmed") is None and pipeline_refusal("small") is None and pipeline_refusal(None) is None
    cached = tmp_path / "seqvec"
    cached.mkdir()
    (cached / "extracted.json").write_text(json.dumps({"name": "seqvec"}))
    assert pipeline_refusal(str(cached)) is not None and pipeline_refusal(str(SEQVEC)) is None


def test_the_docs_table_says_what_the_registry_says_and_that_nothing_is_pinned():
    from spacy_elmo.io.registry import PUBLISHED_ARCHIVES, PUBLISHED_TF_MODELS

    text = (ROOT / "docs" / "download.md").read_text(encoding="utf-8")
    section = text.split("## Contributed models in AllenNLP's format", 1)[1].split("\n## ", 1)[0]
    rows = {line.split("|")[1].strip(" `"): [cell.strip() for cell in line.split("|")[2:-1]]
            for line in section.splitlines() if line.startswith("| `")}
    assert sorted(rows) == sorted(PUBLISHED_CONTRIBUTED)
    for name, (language, layout, urls, pinned) in rows.items():
        model = PUBLISHED_CONTRIBUTED[name]
        assert pinned == ("yes" if model.sha256 or model.weights_sha256 else "no")
        assert language == (model.language or "none: protein residues")
        if model.archive:
            assert f"`{model.archive}`" in urls and model.weights_member in layout
        else:
            folder, weights = model.weights_path.rsplit("/", 1)
            assert f"/models/elmo/{folder}/options.json" in urls or f"/models/elmo/{model.options_path}" in urls
            assert f"`{weights}` beside it" in urls
    pinned = [m for table in (PUBLISHED_MODELS, PUBLISHED_ARCHIVES, PUBLISHED_TF_MODELS)
              for m in table.values() if getattr(m, "sha256", None) or getattr(m, "weights_sha256", None)]
    assert pinned == [] and "**Pinned: none.**" in section
