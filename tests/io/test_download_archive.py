"""Published ELMoForManyLangs zips by language code: downloaded once, verified, unpacked by base name."""
import io
import json
import zipfile

import pytest

from spacy_elmo.io import ModelFileError
from spacy_elmo.io.archive import fetch_archive
from spacy_elmo.io.registry import NLPL_BASE_URL_ENV, PUBLISHED_ARCHIVES, published_archive

from .test_download import FixtureServer

pytestmark = pytest.mark.filterwarnings("ignore:.*downloading over plain http:RuntimeWarning")
MODEL_FILES = {
    "config.json": b'{"config_path": "cnn_50_100_512_4096_sample.json"}',
    "cnn_50_100_512_4096_sample.json": b'{"token_embedder": {}}',
    "char.dic": b"a\t1\n", "word.dic": b"the\t1\n", "token_embedder.pkl": b"weights-1", "encoder.pkl": b"weights-2",
}


def efml_zip(files=MODEL_FILES, extra=()) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in files.items():
            archive.writestr(f"de.model/{name}", data)
        for name, data in extra:
            archive.writestr(name, data)
    return buffer.getvalue()


@pytest.fixture()
def nlpl(monkeypatch, tmp_path):
    server = FixtureServer()
    monkeypatch.setenv(NLPL_BASE_URL_ENV, server.base)
    monkeypatch.setenv("SPACY_ELMO_CACHE", str(tmp_path / "cache"))
    yield server
    server.close()


def test_the_registry_has_efmls_44_languages_at_their_nlpl_numbers():
    assert len(PUBLISHED_ARCHIVES) == 44
    # the numbers ELMoForManyLangs' README links, spot-checked across the table
    for code, number in {"ar": 136, "de": 142, "en": 144, "es": 145, "fr": 150, "id": 158, "it": 159, "ja": 160,
                         "ko": 161, "nl": 164, "nb": 165, "nn": 166, "pt": 168, "sv": 173, "zh": 179}.items():
        assert PUBLISHED_ARCHIVES[code].url == f"http://vectors.nlpl.eu/repository/11/{number}.zip"
    assert len({a.url for a in PUBLISHED_ARCHIVES.values()}) == 44
    assert all(a.http_only and a.family == "elmoformanylangs" for a in PUBLISHED_ARCHIVES.values())
    with pytest.raises(ModelFileError, match="ELMoForManyLangs by language: ar, bg"):
        published_archive("klingon")


def test_an_archive_is_downloaded_once_and_unpacked_by_base_name(nlpl, tmp_path):
    nlpl.files["142.zip"] = efml_zip(extra=[("de.model/run.sh", b"rm -rf /")])
    with pytest.warns(RuntimeWarning, match="plain http"):
        model = fetch_archive("de")
    assert sorted(p.name for p in model.iterdir()) == sorted([*MODEL_FILES, "extracted.json"])
    assert (model / "encoder.pkl").read_bytes() == b"weights-2" and not (model / "run.sh").exists()
    record = json.loads((model / "extracted.json").read_text())
    assert record["language"] == "de" and len(record["zip_sha256"]) == 64
    assert fetch_archive("de") == model and nlpl.count("142.zip") == 1  # from the cache afterwards
    # without the record of a complete unpacking, the kept zip is unpacked again, not downloaded
    (model / "extracted.json").unlink()
    assert (fetch_archive("de") / "extracted.json").is_file() and nlpl.count("142.zip") == 1
    (model / "extracted.json").write_text("{damaged")  # a damaged record: unpacked again as well
    (model / "encoder.pkl").write_bytes(b"tampered")
    assert (fetch_archive("de") / "encoder.pkl").read_bytes() == b"weights-2" and nlpl.count("142.zip") == 1


def test_a_zip_that_is_not_a_model_is_refused_and_not_kept(nlpl, tmp_path):
    nlpl.files["150.zip"] = efml_zip(extra=[("../../escaped.json", b"{}")])
    with pytest.raises(ModelFileError, match=r"member '../../escaped.json' is named by a path that climbs out"):
        fetch_archive("fr")
    assert not list(tmp_path.rglob("escaped.json")) and not list((tmp_path / "cache" / "fr").iterdir())
    nlpl.files["144.zip"] = efml_zip({"config.json": b"{}", "char.dic": b""})
    with pytest.raises(ModelFileError, match="this one holds char.dic, config.json"):
        fetch_archive("en")
    nlpl.files["145.zip"] = b"<html>not found</html>"
    with pytest.raises(ModelFileError, match="not a readable zip"):
        fetch_archive("es")
