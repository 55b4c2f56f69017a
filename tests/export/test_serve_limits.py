"""The limits agree and are shown: the warm-up gives the vectors' width, the start line and
``/health`` say how many tokens an answer holds, an answer of that many tokens is served and one
more is refused, and the longest text by default is one whose answer fits (a limit given is kept)."""
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
httpx = pytest.importorskip("httpx")

from spacy_elmo.export.serve import CHARS_PER_TOKEN, MAX_CHARS, LocalServer, default_max_chars, make_app  # noqa: E402
from spacy_elmo.export.serve_body import answer_tokens  # noqa: E402

from .serving import SEEN, test_pipeline  # noqa: E402


def _words(n):
    return " ".join(["ab"] * n)  # n tokens, 3 characters each with the space


def test_an_answer_of_the_tokens_health_reports_is_served_and_one_more_is_refused_before_it_is_computed(caplog):
    nlp = test_pipeline(gate=True)
    width = nlp("Warm up .")._.elmo.mixed.shape[1]
    with caplog.at_level("INFO", logger="spacy_elmo.serve"):
        app = make_app(nlp, max_chars=20_000, max_response_mb=(4 * width * 100 * 4 / 3 + 50) / 2**20)
    with LocalServer(app) as url, httpx.Client(base_url=url, timeout=60) as client:
        health = client.get("/health").json()
        fits = health["limits"]["answer_tokens"]
        at_limit = client.post("/embed", json={"text": _words(fits["base64"]["mixed"])})
        over = client.post("/embed", json={"text": _words(fits["base64"]["mixed"] + 1)})
        layers_at = client.post("/embed", json={"text": _words(fits["base64"]["layers"]), "layers": True})
        layers_over = client.post("/embed", json={"text": _words(fits["base64"]["layers"] + 1), "layers": True})
        packed = client.post("/embed", json={"text": _words(fits["msgpack"]["mixed"])},
                             headers={"Accept": "application/msgpack"})
        packed_over = client.post("/embed", json={"text": _words(fits["msgpack"]["mixed"] + 1)},
                                  headers={"Accept": "application/msgpack"})
    assert health["limits"]["width"] == width and fits["base64"]["mixed"] == 100
    assert fits == answer_tokens(width, 3, health["limits"]["max_response_bytes"])
    assert at_limit.status_code == 200 and len(at_limit.json()["tokens"]) == 100
    assert over.status_code == 413 and "the response would take" in over.json()["error"]
    assert layers_at.status_code == 200 and layers_over.status_code == 413
    assert packed.status_code == 200 and packed_over.status_code == 413
    assert _words(101) not in SEEN  # refused before it was computed
    [line] = [r.getMessage() for r in caplog.records if r.getMessage().startswith(f"width {width}:")]
    assert f"holds 100 tokens of the mixed vector, {fits['base64']['layers']} with the layers" in line
    assert "texts of at most 20000 characters (as given)" in line


def test_the_longest_text_by_default_is_one_whose_answer_fits_and_a_given_one_is_kept():
    nlp = test_pipeline()
    width = nlp("Warm up .")._.elmo.mixed.shape[1]
    small = (4 * width * 50 * 4 / 3 + 10) / 2**20  # 50 tokens of the mixed vector in the default body
    fitted = make_app(nlp, max_response_mb=small)
    given = make_app(nlp, max_response_mb=small, max_chars=1000)
    assert fitted.state.limits["max_chars"] == 50 * CHARS_PER_TOKEN
    assert given.state.limits["max_chars"] == 1000
    with LocalServer(fitted) as url:
        refused = httpx.post(f"{url}/embed", json={"text": "x" * (50 * CHARS_PER_TOKEN + 1)}, timeout=60)
        served = httpx.post(f"{url}/embed", json={"text": _words(50)}, timeout=60)
    assert refused.status_code == 413 and f"over the limit of {50 * CHARS_PER_TOKEN}" in refused.json()["error"]
    assert served.status_code == 200
    assert make_app(nlp).state.limits["max_chars"] == MAX_CHARS  # the tiny width fits 20,000 characters' answer


def test_at_the_published_width_the_default_answer_holds_1536_tokens_and_texts_of_6144_characters():
    tokens = answer_tokens(1024, 3, 8 * 2**20)
    assert tokens["base64"] == {"mixed": 1536, "layers": 384}
    assert tokens["msgpack"] == {"mixed": 2048, "layers": 512}
    assert default_max_chars(tokens) == 6144
