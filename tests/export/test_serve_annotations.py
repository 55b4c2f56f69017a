"""A trained pipeline's annotations reach the answer beside the vectors: tags, the parse, entities,
sentences and a classifier's scores as ``nlp(text)`` sets them, only where the Docs have them, and
the fields before them as they were."""
import numpy as np
import pytest
import spacy
from spacy.tokens import Doc

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
httpx = pytest.importorskip("httpx")

from spacy_elmo.export.serve import LocalServer, make_app  # noqa: E402
from spacy_elmo.export.serve_body import ANNOTATIONS, annotations_of, decode_array, doc_annotations  # noqa: E402

from .serving import test_pipeline, trained_pipeline  # noqa: E402

TEXTS = ["Anna sat by the river in Paris . The bank closed .", "We deposited cash at the bank .",
         "Boats came back to Paris ."]


def _expected(doc):
    return {
        "tokens": [t.text for t in doc],
        "tags": [t.tag_ for t in doc],
        "heads": [t.head.i for t in doc],
        "deps": [t.dep_ for t in doc],
        "ents": [[e.start, e.end, e.label_] for e in doc.ents],
        "sents": [[s.start, s.end] for s in doc.sents],
    }


def test_a_trained_pipeline_answers_its_tags_parse_entities_sentences_and_cats_as_nlp_sets_them(caplog):
    import srsly

    nlp = trained_pipeline()
    with caplog.at_level("INFO", logger="spacy_elmo.serve"):
        app = make_app(nlp)
    with LocalServer(app) as url, httpx.Client(base_url=url, timeout=60) as client:
        alone = [client.post("/embed", json={"text": t}).json() for t in TEXTS]
        packed = srsly.msgpack_loads(client.post("/embed", json={"texts": TEXTS, "layers": True},
                                                 headers={"Accept": "application/msgpack"}).content)["results"]
    assert app.state.limits["width"] == nlp("A text .")._.elmo.mixed.shape[1]
    for text, answer in zip(TEXTS, alone):
        doc = nlp(text)
        assert set(answer) == {"tokens", "mixed", "tags", "heads", "deps", "ents", "sents", "cats"}
        assert list(answer)[:2] == ["tokens", "mixed"]  # the fields of before come first, as they were
        assert {k: answer[k] for k in _expected(doc)} == _expected(doc)
        assert answer["cats"].keys() == doc.cats.keys()
        assert all(abs(answer["cats"][label] - score) <= 1e-5 for label, score in doc.cats.items())
        assert np.abs(decode_array(answer["mixed"]) - doc._.elmo.mixed).max() <= 1e-5
    for doc, answer in zip(nlp.pipe(TEXTS), packed):  # batched as the server batched them
        assert {k: answer[k] for k in _expected(doc)} == _expected(doc)
        assert np.abs(decode_array(answer["layers"]) - doc._.elmo.layers).max() <= 1e-5
    assert any(answer["ents"] for answer in alone)  # the entity recognizer found something to show
    # the start line names the annotations by the keys the answers hold them under
    [line] = [r.getMessage() for r in caplog.records if "; annotations: " in r.getMessage()]
    named = set(line.split("; annotations: ")[1].replace(",", " ").split())
    assert named - {"pos", "morphs", "lemmas"} == set(alone[0]) - {"tokens", "mixed"}
    assert len(alone[0]["sents"]) >= 1 and alone[0]["tags"] != []


def test_a_pipeline_without_other_components_answers_its_vectors_alone():
    with LocalServer(make_app(test_pipeline())) as url:
        answer = httpx.post(f"{url}/embed", json={"texts": ["A bank .", "One"]}, timeout=60).json()["results"]
    assert [set(a) for a in answer] == [{"tokens", "mixed"}, {"tokens", "mixed"}]


def test_only_the_annotations_a_doc_has_are_answered():
    vocab = spacy.blank("en").vocab
    tagged = Doc(vocab, words=["A", "bank", "."], tags=["DT", "NN", "."])
    assert annotations_of(tagged) == ["TAG"]
    assert doc_annotations(tagged, ANNOTATIONS) == {"tags": ["DT", "NN", "."]}
    plain = Doc(vocab, words=["A", "bank", "."])
    assert annotations_of(plain) == [] and doc_annotations(plain, ANNOTATIONS) == {}
    parsed = Doc(vocab, words=["Banks", "close", "."], heads=[1, 1, 1], deps=["nsubj", "ROOT", "punct"],
                 ents=["B-ORG", "O", "O"], lemmas=["bank", "close", "."], pos=["NOUN", "VERB", "PUNCT"])
    parsed.cats = {"CALM": 0.25}
    assert doc_annotations(parsed, ANNOTATIONS) == {
        "pos": ["NOUN", "VERB", "PUNCT"], "lemmas": ["bank", "close", "."], "heads": [1, 1, 1],
        "deps": ["nsubj", "ROOT", "punct"], "ents": [[0, 1, "ORG"]], "sents": [[0, 3]], "cats": {"CALM": 0.25}}
    # the pipeline's kinds bound what is answered: a Doc's parse is not answered where the pipeline sets none
    assert doc_annotations(parsed, ["TAG"]) == {}
