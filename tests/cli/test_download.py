"""`download`: published models by name or URL into the cache, a directory, or a spaCy pipeline."""
import json
from pathlib import Path

import numpy as np
import pytest
import spacy
from spacy.tokens import Doc
from typer.testing import CliRunner

from spacy_elmo.cli import app

from spacy_elmo.io.download import ALLOW_HTTP_ENV

from ..io.test_download import OPTIONS, OPTIONS_PATH, WEIGHTS, WEIGHTS_PATH, server  # noqa: F401 (fixture)

# the fixture server speaks plain http, which its tests allow unless they say otherwise
pytestmark = pytest.mark.filterwarnings("ignore:.*downloading over plain http:RuntimeWarning")

runner = CliRunner()


def test_download_pipeline_loads_with_spacy_and_matches_the_reference(
    server, tmp_path, tiny_sentences, tiny_expected  # noqa: F811
):
    server.publish_small()
    out = tmp_path / "en_elmo_small"
    result = runner.invoke(app, ["download", "small", "--as-pipeline", "--output", str(out)])
    assert result.exit_code == 0, result.output
    nlp = spacy.load(out)
    assert nlp.pipe_names == ["elmo"] and nlp.get_pipe("elmo").cfg["bilm_options"]["lstm"]["projection_dim"] == 16
    docs = nlp.pipe(Doc(nlp.vocab, words=words) for words in tiny_sentences)
    for i, doc in enumerate(docs):
        np.testing.assert_allclose(doc._.elmo.layers, tiny_expected[f"layers_{i}"], atol=1e-5)
    # the files went to the cache, with their records
    assert (tmp_path / "cache" / "small" / "weights.hdf5.sha256.json").is_file()


def test_download_name_to_a_directory_and_a_pair_by_url(server, tmp_path):  # noqa: F811
    server.publish_small()
    result = runner.invoke(app, ["download", "small", "--output", str(tmp_path / "files")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "files" / "weights.hdf5").read_bytes() == WEIGHTS
    assert not (tmp_path / "cache").exists()
    urls = ["--options-url", server.base + OPTIONS_PATH, "--weights-url", server.base + WEIGHTS_PATH]
    result = runner.invoke(app, ["download", *urls])
    assert result.exit_code == 0, result.output
    cached = list((tmp_path / "cache" / "urls").glob("*/options.json"))
    assert [p.read_bytes() for p in cached] == [OPTIONS]
    record = json.loads((cached[0].parent / "weights.hdf5.sha256.json").read_text())
    assert record["url"] == server.base + WEIGHTS_PATH


def test_download_errors_say_what_to_do(server, tmp_path):  # noqa: F811
    result = runner.invoke(app, ["download", "large"])
    assert result.exit_code == 1 and "small, medium, original, original-5.5b" in result.output
    result = runner.invoke(app, ["download", "small"])  # the server has no files: 404
    assert result.exit_code == 1 and "HTTP 404" in result.output and server.base + OPTIONS_PATH in result.output
    assert not (tmp_path / "cache").exists()  # nothing left behind, not even a folder
    result = runner.invoke(app, ["download", "small", "--pipeline"])  # the old spelling, for one release
    assert result.exit_code == 2 and "--output" in result.output and "--pipeline is now --as-pipeline" in result.output
    result = runner.invoke(app, ["download", "small", "--options", server.base + OPTIONS_PATH])
    assert result.exit_code == 2 and "not both" in result.output and "--options is now --options-url" in result.output


def test_download_refuses_a_model_of_another_shape_placed_by_hand_in_one_line(server, tmp_path):  # noqa: F811
    folder = tmp_path / "cache" / "small"
    folder.mkdir(parents=True)
    (folder / "options.json").write_bytes(OPTIONS)
    (folder / "weights.hdf5").write_bytes(WEIGHTS)
    result = runner.invoke(app, ["download", "small"])
    error = result.output.split("Error: ", 1)[1]
    assert result.exit_code == 1 and error.count("\n") == 1 and error.startswith(f"{folder / 'options.json'}: placed by hand")
    assert "lstm.dim 64 (published 1024)" in error and server.requests == []
    assert sorted(path.name for path in folder.iterdir()) == ["options.json", "weights.hdf5"]  # nothing recorded


def test_download_over_plain_http_needs_allow_http_and_warns(server, tmp_path, monkeypatch):  # noqa: F811
    server.publish_small()
    monkeypatch.delenv(ALLOW_HTTP_ENV)
    urls = ["--options-url", server.base + OPTIONS_PATH, "--weights-url", server.base + WEIGHTS_PATH]
    for args in (["small"], urls):
        result = runner.invoke(app, ["download", *args, "--output", str(tmp_path / "files")])
        assert result.exit_code == 1 and "refusing plain http" in result.output and "--allow-http" in result.output
    assert server.requests == []
    with pytest.warns(RuntimeWarning, match="downloading over plain http"):
        result = runner.invoke(app, ["download", "small", "--allow-http", "--output", str(tmp_path / "files")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "files" / "weights.hdf5").read_bytes() == WEIGHTS


PUBLISHED_EFML = Path(__file__).resolve().parents[1] / "data" / "elmoformanylangs" / "published"


def test_download_an_elmoformanylangs_language_as_a_pipeline(tmp_path, monkeypatch):
    """`download de --pipeline`: the NLPL zip as published (no architecture JSON, config_path on
    the authors' machine; made by EFML's own code) fetched over http with a warning, unpacked, and
    a German pipeline written that gives EFML's own layers."""
    from spacy_elmo.io.registry import NLPL_BASE_URL_ENV

    from ..io.test_download import FixtureServer

    data = PUBLISHED_EFML.parent
    published = PUBLISHED_EFML / "relative-config-path.zip"  # no meta.json: the language is the registry's
    server = FixtureServer()
    try:
        server.files["142.zip"] = published.read_bytes()
        monkeypatch.setenv(NLPL_BASE_URL_ENV, server.base)
        monkeypatch.setenv("SPACY_ELMO_CACHE", str(tmp_path / "cache"))
        with pytest.warns(RuntimeWarning, match="plain http"):
            result = runner.invoke(app, ["download", "de", "--as-pipeline", "--output", str(tmp_path / "de_elmo")])
        assert result.exit_code == 0, result.output
    finally:
        server.close()
    assert "config_path '../configs/cnn_50_100_512_4096_sample.json' names a file outside the model" in result.output
    nlp = spacy.load(tmp_path / "de_elmo")
    assert nlp.lang == "de"
    sentences = json.loads((data / "sentences.json").read_text(encoding="utf-8"))
    with np.load(PUBLISHED_EFML / "relative-config-path.npz") as golden:
        for i, doc in enumerate(nlp.pipe(Doc(nlp.vocab, words=words) for words in sentences)):
            expected = golden[f"layers_{i}"]
            assert doc._.elmo.layers.shape == expected.shape
            assert expected.size == 0 or np.abs(doc._.elmo.layers - expected).max() <= 1e-5, i
