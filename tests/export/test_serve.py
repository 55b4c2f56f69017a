"""The served pipeline under a short load test on 127.0.0.1: every response equals the offline result,
bad requests get a 4xx with a message, and the server keeps serving."""
from pathlib import Path

import pytest
import spacy

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
pytest.importorskip("httpx")

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
