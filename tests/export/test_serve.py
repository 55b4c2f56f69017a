"""The served pipeline under a short load test on 127.0.0.1: every response equals the offline result,
bad requests get a 4xx with a message, and the server keeps serving."""
from pathlib import Path

import numpy as np
import pytest
import spacy

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
httpx = pytest.importorskip("httpx")

from lab.serve.load_test import TOLERANCE, conllu_texts, load_test  # noqa: E402

from ..conftest import TINY  # noqa: E402

DEV = Path(__file__).parent.parent.parent / "sample" / "ewt" / "dev.conllu"


def _tiny_pipeline():
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo")
    nlp.config["initialize"]["components"]["elmo"] = {
        "options": str(TINY / "options.json"), "weights": str(TINY / "weights.hdf5")}
    nlp.initialize()
    return nlp


def test_concurrent_clients_get_the_offline_layers_and_bad_requests_a_4xx_with_a_message():
    report = load_test(_tiny_pipeline, conllu_texts(DEV), levels=[1, 8, 32], requests=32,
                       time_limit=60.0)
    for level in report["levels"]:
        assert level["requests"] == 32 and level["failed"] == []
        assert level["responses_differing_from_offline"] == 0
        assert level["max_abs_diff_to_offline"] <= TOLERANCE
        assert level["latency_ms"]["p50"] <= level["latency_ms"]["p99"]
    # concurrent requests were batched: some batch held more than one text
    assert report["levels"][2]["batches"]["mean_size"] > 1
    assert report["offline"]["texts"] == 97 and report["offline"]["batched_vs_alone_max_abs_diff"] <= TOLERANCE
    answers = {a["request"]: a for a in report["bad_requests"]}
    for name in ("not JSON", "no text field", "text not a string"):
        assert answers[name]["status"] == 422 and answers[name]["error"].startswith("malformed request")
    assert answers["oversized text"]["status"] == 413 and "over the limit" in answers["oversized text"]["error"]
    assert answers["well-formed after them"]["status"] == 200


def test_serving_a_pipeline_folder_that_does_not_exist_is_a_one_line_error(tmp_path):
    from typer.testing import CliRunner

    from spacy_elmo.cli import app

    result = CliRunner().invoke(app, ["serve", "--pipeline", str(tmp_path / "absent")])
    assert result.exit_code == 2 and "pipeline folder not found" in result.stderr


def _served_sentence():
    """The trained test pair served, a 24-token sentence, and its offline mixed vector and layers: from
    a pipeline warmed up as the server's is (its char-CNN cache then holds the same values, bit for bit)."""
    from spacy_elmo.export.serve_pipeline import warm_up

    from .serving import test_pipeline

    words = "The bank by the river , where we sat all morning long , was quiet until the boats came slowly back at noon ."
    offline = test_pipeline()
    warm_up(offline)
    doc = offline(words)
    assert len(doc) == 24
    return test_pipeline(), words, doc._.elmo


def test_the_default_body_is_the_mixed_vector_in_base64_and_says_the_defaults_changed():
    from spacy_elmo.export.serve import LocalServer, make_app
    from spacy_elmo.export.serve_body import decode_array

    nlp, text, elmo = _served_sentence()
    with LocalServer(make_app(nlp)) as url, httpx.Client(base_url=url, timeout=60) as client:
        default = client.post("/embed", json={"text": text}, headers={"Accept-Encoding": "identity"})
        numbers = client.post("/embed", json={"text": text, "layers": True, "encoding": "numbers"})
    body = default.json()
    assert set(body) == {"tokens", "mixed"} and body["mixed"]["shape"] == list(elmo.mixed.shape)
    assert np.array_equal(decode_array(body["mixed"]), elmo.mixed)
    assert "since 0.10" in default.headers["Warning"] and "Warning" not in numbers.headers
    layers = numbers.json()["layers"]
    assert isinstance(layers["data"], list) and np.array_equal(decode_array(layers), elmo.layers)  # exact in JSON numbers
    assert len(default.content) < elmo.mixed.nbytes * 4 / 3 + 1024


def test_msgpack_is_within_a_tenth_of_the_raw_floats_and_gzip_is_honoured():
    import srsly

    from spacy_elmo.export.serve import LocalServer, make_app
    from spacy_elmo.export.serve_body import decode_array

    nlp, text, elmo = _served_sentence()
    with LocalServer(make_app(nlp)) as url, httpx.Client(base_url=url, timeout=60) as client:
        packed = client.post("/embed", json={"text": text, "layers": True},
                             headers={"Accept": "application/msgpack", "Accept-Encoding": "identity"})
        zipped = client.post("/embed", json={"text": text}, headers={"Accept-Encoding": "gzip"})
        refused_gzip = client.post("/embed", json={"text": text}, headers={"Accept-Encoding": "gzip;q=0"})
    assert packed.headers["content-type"] == "application/msgpack"
    raw = elmo.mixed.nbytes + elmo.layers.nbytes
    token_bytes = sum(len(t.encode()) + 1 for t in srsly.msgpack_loads(packed.content)["tokens"])
    assert len(packed.content) <= raw + token_bytes + 128  # the arrays' bytes as they are, a few keys beside
    result = srsly.msgpack_loads(packed.content)
    assert np.array_equal(decode_array(result["layers"]), elmo.layers)
    assert zipped.headers["content-encoding"] == "gzip" and "content-encoding" not in refused_gzip.headers
    assert int(zipped.headers["content-length"]) < len(refused_gzip.content)
    assert zipped.json() == refused_gzip.json()  # httpx undid the gzip


def test_metrics_count_requests_errors_batches_and_latency():
    from spacy_elmo.export.serve import LocalServer, make_app

    nlp, text, _ = _served_sentence()
    with LocalServer(make_app(nlp, max_queue=7)) as url, httpx.Client(base_url=url, timeout=60) as client:
        client.post("/embed", json={"texts": [text, "Two ."]})
        client.post("/embed", json={"txt": text})
        snapshot = client.get("/metrics", headers={"Accept": "application/json"}).json()
        text_format = client.get("/metrics").text
        health = client.get("/health").json()
    assert snapshot["requests"] == {"200": 1, "422": 1} and snapshot["errors"] == 1
    assert snapshot["texts"] == 2 and snapshot["tokens"] == 26 and snapshot["batch_sizes"] == {"2": 1}
    assert snapshot["queue_limit"] == 7 and snapshot["queue_depth"] == 0
    assert 0 < snapshot["latency_seconds"]["p50"] <= snapshot["latency_seconds"]["p99"]
    assert 'elmo_requests_total{status="422"} 1' in text_format and "elmo_queue_limit 7" in text_format
    assert {k: health[k] for k in ("status", "batches", "texts", "torch_threads")} == {
        "status": "ok", "batches": 1, "texts": 2, "torch_threads": 1}
    assert snapshot["lanes"] == {"short": {"queue_depth": 0, "batches": 1, "texts": 2},
                                 "long": {"queue_depth": 0, "batches": 0, "texts": 0}}
    assert 'elmo_lane_batches_total{lane="short"} 1' in text_format and 'elmo_lane_queue_depth{lane="long"} 0' in text_format


def test_each_request_is_logged_with_its_id_status_tokens_and_latency(caplog):
    from spacy_elmo.export.serve import LocalServer, make_app

    nlp, text, _ = _served_sentence()
    with caplog.at_level("INFO", logger="spacy_elmo.serve"):
        with LocalServer(make_app(nlp)) as url:
            httpx.post(f"{url}/embed", json={"text": text}, headers={"X-Request-ID": "r-1"}, timeout=60)
    [line] = [r.getMessage() for r in caplog.records if "request_id=r-1" in r.getMessage()]
    assert "status=200 texts=1 tokens=24" in line and "latency_ms=" in line and "bytes=" in line


def test_serving_a_published_pair_folder_or_files_by_model_and_a_pipeline_without_its_cache(tmp_path):
    from spacy_elmo.export.serve_pipeline import serving_pipeline
    from spacy_elmo.layers.bilm_model import CACHE_ATTR

    from ..conftest import TINY

    by_folder = serving_pipeline(model=TINY, lang="en")
    by_files = serving_pipeline(options=TINY / "options.json", weights=TINY / "weights.hdf5", lang="en")
    assert np.array_equal(by_folder("A bank .")._.elmo.layers, by_files("A bank .")._.elmo.layers)
    with pytest.raises(ValueError, match="records no language; give it with --lang"):
        serving_pipeline(model=TINY)
    assert by_folder.get_pipe("elmo").model.attrs[CACHE_ATTR].max_bytes == 0
    by_folder.to_disk(tmp_path / "pipeline")
    cached = serving_pipeline(tmp_path / "pipeline", frozen_cache_mb=2)
    assert cached.get_pipe("elmo").model.attrs[CACHE_ATTR].max_bytes == 2 * 2**20
    assert serving_pipeline(tmp_path / "pipeline").get_pipe("elmo").model.attrs[CACHE_ATTR].max_bytes == 0


def test_serving_a_model_that_is_not_there_or_two_sources_is_a_one_line_error(tmp_path):
    from typer.testing import CliRunner

    from spacy_elmo.cli import app

    missing = CliRunner().invoke(app, ["serve", "--model", str(tmp_path / "absent"), "--lang", "en"])
    assert missing.exit_code == 2 and "serve:" in missing.stderr and "absent" in missing.stderr
    both = CliRunner().invoke(app, ["serve", "--pipeline", str(tmp_path), "--model", "small"])
    assert both.exit_code == 2 and "give either --pipeline or a biLM" in both.stderr
