import io
import json

import pytest

from spacy_elmo.training.pretrain import pretrain

from .conftest import ADJECTIVES, NOUNS, VERBS, grammar_sentences, tiny_config, write_corpus

TAG = {**{w: "NOUN" for w in NOUNS}, **{w: "VERB" for w in VERBS}, **{w: "ADJ" for w in ADJECTIVES}, "the": "DET", ".": "PUNCT"}


def _conllu(path, n, seed):
    blocks = []
    for words in grammar_sentences(n, seed):
        rows = [f"{i + 1}\t{w}\t{w}\t{TAG.get(w, 'NUM')}\t_\t_\t0\tx\t_\t_" for i, w in enumerate(words)]
        blocks.append("\n".join(rows) + "\n")
    path.write_text("\n".join(blocks), encoding="utf-8")
    return path


def test_pretrain_with_a_probe_logs_its_scores_beside_perplexity(tmp_path):
    train, dev = write_corpus(tmp_path / "train.txt", 200, seed=1), write_corpus(tmp_path / "dev.txt", 30, seed=2)
    config = tiny_config(
        train, dev, training__max_steps=12, training__eval_frequency=6, probe__enabled=True,
        probe__train=str(_conllu(tmp_path / "train.conllu", 40, seed=3)),
        probe__eval=str(_conllu(tmp_path / "dev.conllu", 20, seed=4)), probe__train_fraction=1.0, probe__max_sentences=30,
    )
    stream = io.StringIO()
    pretrain(config, tmp_path / "out", stream=stream)
    records = [json.loads(line) for line in (tmp_path / "out" / "metrics.jsonl").read_text().splitlines()]
    evals = [r for r in records if r["kind"] == "eval"]
    assert [r["step"] for r in evals] == [6, 12]
    for record in evals:
        assert record["probe"]["task"] == "upos" and record["probe"]["metric"] == "accuracy"
        scores = record["probe"]["scores"]
        assert {"layer 0", "layer 1", "layer 2", "mean", "scalar mix", "majority", "word identity"} == set(scores)
        assert all(0.0 <= v <= 100.0 for v in scores.values()) and "dev_ppl" in record
    assert "step 12: upos probe layer 0" in stream.getvalue()
    assert (tmp_path / "out" / "learning-curve.png").is_file()


def test_probe_is_off_by_default_and_checks_its_settings(tmp_path):
    train = write_corpus(tmp_path / "train.txt", 20, seed=1)
    assert not tiny_config(train).probe.enabled
    with pytest.raises(ValueError, match="probe.task must be one of"):
        tiny_config(train, probe__task="pos")
    with pytest.raises(ValueError, match="probe.train_fraction"):
        tiny_config(train, probe__train_fraction=1.5)
