"""A short request is not held behind a long text: requests wait in a short or a long lane by their
size, each lane with its own worker thread, both running the same pipeline; two threads running it
at once get what ``nlp(text)`` gets alone, a frozen layer cache on or off; lanes asked to take turns
do."""
import asyncio
import threading
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
httpx = pytest.importorskip("httpx")

from lab.serve.load_test import conllu_texts  # noqa: E402
from spacy_elmo.export.serve import LocalServer, make_app  # noqa: E402
from spacy_elmo.export.serve_body import decode_array  # noqa: E402
from spacy_elmo.export.serve_pipeline import serving_pipeline  # noqa: E402

from ..conftest import TRAINED  # noqa: E402
from .serving import GATE, MEETING, SEEN, test_pipeline, trained_pipeline, until  # noqa: E402

DEV = Path(__file__).parent.parent.parent / "sample" / "ewt" / "dev.conllu"
LONG_CHARS = 60


def _long_text():
    """A text over LONG_CHARS that the gate holds until the test opens it."""
    text = f"HOLD a long text {len(SEEN)} " + "that goes on and on " * 4 + "."
    assert len(text) > LONG_CHARS
    return text


def _held_long_then_short(app, url, short, while_held):
    """Send a long text the gate holds, then ``short`` once the long one is being computed; run
    ``while_held(short_answer_task)`` with the gate still shut, then open it. RETURNS the long and the
    short answer and what ``while_held`` returned."""
    GATE.clear()
    long_text = _long_text()

    async def run():
        async with httpx.AsyncClient(base_url=url, timeout=120) as client:
            held = asyncio.ensure_future(client.post("/embed", json={"text": long_text}))
            await until(lambda: long_text in SEEN)  # its batch is in the pipeline, at the gate
            answer = asyncio.ensure_future(client.post("/embed", json={"text": short}))
            try:
                seen = await while_held(answer, held)
            finally:
                GATE.set()
            return await held, await answer, seen

    return asyncio.run(run())


def _short_answered_while_long_held(app):
    """The short request's and the long text's answers, after checking that the short one was
    answered while the long one was still held at the gate."""
    short = f"A short text {len(SEEN)} ."

    async def while_held(answer, held):
        await until(answer.done)  # with the long text still at the gate
        return held.done(), GATE.is_set()

    with LocalServer(app) as url:
        held, answer, (long_done, gate_open) = _held_long_then_short(app, url, short, while_held)
    assert not long_done and not gate_open
    assert answer.status_code == 200 and held.status_code == 200
    return short, answer


def test_a_short_request_is_answered_while_a_long_text_is_still_being_computed():
    nlp = test_pipeline(gate=True)
    app = make_app(nlp, long_chars=LONG_CHARS, wait_ms=0)
    short, answer = _short_answered_while_long_held(app)
    offline = test_pipeline()
    assert np.abs(decode_array(answer.json()["mixed"]) - offline(short)._.elmo.mixed).max() <= 1e-5
    lanes = app.state.metrics.snapshot()["lanes"]
    assert lanes["short"]["texts"] == 1 and lanes["long"]["texts"] == 1


def test_with_one_lane_the_short_request_waits_behind_the_long_text():
    nlp = test_pipeline(gate=True)
    app = make_app(nlp, long_chars=0, wait_ms=0)
    short = f"A short text {len(SEEN)} ."

    async def while_held(answer, held):
        await until(lambda: app.state.batcher.waiting == 1)
        # the one worker is at the gate: the short request stays queued, not computed
        return short in SEEN, answer.done(), list(app.state.batcher.lanes)

    with LocalServer(app) as url:
        held, answer, (computed, answered, lanes) = _held_long_then_short(app, url, short, while_held)
    assert not computed and not answered and lanes == ["all"]
    assert answer.status_code == 200 and held.status_code == 200


def test_a_request_goes_to_the_long_lane_by_its_characters_together():
    app = make_app(test_pipeline(), long_chars=LONG_CHARS)
    lanes = app.state.batcher
    assert lanes.lane_of(["x" * LONG_CHARS]).lane == "short"
    assert lanes.lane_of(["x" * (LONG_CHARS + 1)]).lane == "long"
    assert lanes.lane_of(["x" * 40, "y" * 40]).lane == "long"  # each short, together long


def test_the_lanes_share_one_bounded_queue():
    GATE.clear()
    app = make_app(test_pipeline(gate=True), long_chars=LONG_CHARS, max_queue=2, wait_ms=0)
    hold_short = f"HOLD short {len(SEEN)}"
    long_text = _long_text()

    async def run(url):
        async with httpx.AsyncClient(base_url=url, timeout=120) as client:
            held = [asyncio.ensure_future(client.post("/embed", json={"text": t})) for t in (hold_short, long_text)]
            await until(lambda: hold_short in SEEN and long_text in SEEN)  # both workers at the gate
            queued = [asyncio.ensure_future(client.post("/embed", json={"text": "Queued short ."})),
                      asyncio.ensure_future(client.post("/embed", json={"text": "Queued long " + "x" * LONG_CHARS}))]
            await until(lambda: app.state.batcher.waiting == 2)
            refused = await client.post("/embed", json={"text": "One too many ."})
            GATE.set()
            return refused, list(await asyncio.gather(*held, *queued))

    with LocalServer(app) as url:
        refused, answers = asyncio.run(run(url))
    assert refused.status_code == 503 and "the queue holds 2" in refused.json()["error"]
    assert "Retry-After" in refused.headers
    assert [a.status_code for a in answers] == [200] * 4
    assert app.state.metrics.snapshot()["lanes"]["long"]["texts"] == 2


def test_two_threads_running_the_pipeline_at_once_get_what_nlp_gets_alone():
    """The package's inference from two threads at once (its per-thread buffers and locked char-CNN
    cache; the trained tagger, parser, entity recognizer and text classifier beside it): every
    vector within 1e-5 of ``nlp(text)`` alone, every tag as ``nlp(text)`` gives it."""
    nlp = trained_pipeline()
    nlp.add_pipe("serve_test_meet", first=True)
    try:
        texts = conllu_texts(DEV)[:24]
        alone = {t: nlp(t) for t in texts}
        halves = [["MEET the other thread ."] + texts[:12], ["MEET the other thread ."] + texts[12:]]
        got, errors = {}, []

        def run(half):
            try:
                for _ in range(3):
                    MEETING.wait(timeout=120)  # the two threads enter nlp.pipe together
                    for text, doc in zip(half, nlp.pipe(half, batch_size=4)):
                        got.setdefault(text, []).append(doc)
            except Exception as err:  # failed in a thread: reported by the test below
                errors.append(err)

        threads = [threading.Thread(target=run, args=(half,)) for half in halves]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=300)
    finally:
        nlp.remove_pipe("serve_test_meet")
    assert not errors
    assert all(len(got[t]) == 3 for t in texts)
    for text in texts:
        for doc in got[text]:
            assert np.abs(doc._.elmo.layers - alone[text]._.elmo.layers).max() <= 1e-5
            assert [t.tag_ for t in doc] == [t.tag_ for t in alone[text]]


def test_a_pipeline_whose_frozen_cache_is_on_runs_its_lanes_side_by_side_and_they_take_turns_when_asked():
    nlp = serving_pipeline(options=TRAINED / "options.json", weights=TRAINED / "lm_weights.hdf5", lang="en",
                           frozen_cache_mb=1)
    nlp.add_pipe("serve_test_gate", first=True)
    side = make_app(nlp, long_chars=LONG_CHARS, wait_ms=0)
    assert side.state.batcher.side_by_side and side.state.limits["lanes_side_by_side"] is True
    _short_answered_while_long_held(side)

    turns = make_app(nlp, long_chars=LONG_CHARS, wait_ms=0, side_by_side=False)
    assert not turns.state.batcher.side_by_side and turns.state.limits["lanes_side_by_side"] is False
    short = f"A short text {len(SEEN)} ."

    async def while_held(answer, held):
        short_lane = turns.state.batcher.lanes["short"]
        await until(lambda: short_lane.waiting_for_turn == 1)  # taken, and waiting for the long lane's batch
        return short in SEEN, answer.done()

    with LocalServer(turns) as url:
        held, answer, (computed, answered) = _held_long_then_short(turns, url, short, while_held)
    assert not computed and not answered
    assert answer.status_code == 200 and held.status_code == 200
