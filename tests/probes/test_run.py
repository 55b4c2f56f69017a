import json

import pytest

from spacy_elmo.probes import run_probe
from spacy_elmo.probes.ner import to_bio
from spacy_elmo.probes.report import write_report
from spacy_elmo.records.provenance import portable_path

from .conftest import SENSES, PlantedFeatures, planted_tags, write_conllu, tagged_sentences


def _quiet(**kwargs):
    import io

    return run_probe(stream=io.StringIO(), **kwargs)


@pytest.mark.parametrize("layer", [0, 2])
def test_upos_finds_the_layer_that_carries_the_tag_and_chance_elsewhere(upos_files, layer):
    train, held_out, sentences = upos_files
    result = _quiet(tasks="upos", bilm=planted_tags(sentences, layer=layer), train=train, eval=held_out, train_fraction=1.0)
    scores = result["upos"].scores
    assert scores[f"layer {layer}"] > 95
    for other in {0, 1, 2} - {layer}:
        assert scores[f"layer {other}"] < 45  # 4 random tags: chance is 25%
    assert scores["scalar mix"] > 90 and scores["majority"] < 45 and scores["word identity"] < 45
    assert result["upos"].best_layer() == f"layer {layer}"


def test_ner_scores_entity_f1_from_the_planted_layer(tmp_path):
    sentences = tagged_sentences(120, seed=7)
    bio = {"NOUN": "B-PER", "VERB": "I-PER", "ADJ": "O", "DET": "B-LOC"}
    tagged = [(words, tuple(bio[t] for t in tags)) for words, tags in sentences]
    for name, part in (("train", tagged[:80]), ("dev", tagged[80:])):
        (tmp_path / f"{name}.conll").write_text(
            "-DOCSTART- O\n\n" + "\n\n".join("\n".join(f"{w} {t}" for w, t in zip(*s)) for s in part) + "\n", encoding="utf-8"
        )
    names = sorted({t for _, tags in tagged for t in to_bio(tags)})
    labels = {(words, k): names.index(t) for words, tags in tagged for k, t in enumerate(to_bio(tags))}
    result = _quiet(tasks="ner", bilm=PlantedFeatures(labels, layer=1), train=tmp_path / "train.conll",
                    eval=tmp_path / "dev.conll", train_fraction=1.0)
    scores = result["ner"].scores
    assert result["ner"].metric == "entity F1"
    assert scores["layer 1"] > 90 and scores["layer 0"] < 50 and scores["majority"] < 50


def test_wsd_nearest_sense_finds_the_planted_layer(wsd_file):
    path, uses = wsd_file
    labels = {(tokens, position): SENSES.index(sense) for sense, tokens, position in uses}
    result = _quiet(tasks="wsd", bilm=PlantedFeatures(labels, layer=1), train=path)
    task = result["wsd"]
    assert task.data["eval"] == "seeded split of train" and task.sizes["eval_uses"] == 30
    assert task.scores["layer 1"] > 95 and task.scores["scalar mix"] > 95
    assert task.scores["layer 0"] < 60 and task.scores["layer 2"] < 60  # 3 senses: chance is 33%
    assert task.details["mix_weights"][1] > 0.5


@pytest.mark.parametrize("default_layer,high", [(1, True), (0, False)])
def test_wsd_nearest_use_scores_each_row_and_the_models_default_vectors(wsd_file, default_layer, high):
    from spacy_elmo.bilm import VectorSetting

    path, uses = wsd_file
    labels = {(tokens, position): SENSES.index(sense) for sense, tokens, position in uses}
    bilm = PlantedFeatures(labels, layer=1)
    weights = tuple(1.0 if k == default_layer else 0.0 for k in range(3))
    bilm.vector_setting = VectorSetting(weights, None, "planted")
    nearest = _quiet(tasks="wsd", bilm=bilm, train=path)["wsd"].details["nearest_use"]
    assert nearest["layer 1"] > 95 and nearest["layer 0"] < 60 and nearest["layer 2"] < 60
    assert (nearest["default vectors"] > 95) is high
    assert nearest["default vectors"] == nearest[f"layer {default_layer}"]


def test_wsd_without_a_vector_setting_has_no_default_vectors_row(wsd_file):
    path, uses = wsd_file
    labels = {(tokens, position): SENSES.index(sense) for sense, tokens, position in uses}
    details = _quiet(tasks="wsd", bilm=PlantedFeatures(labels, layer=1), train=path)["wsd"].details
    assert "default vectors" not in details["nearest_use"] and details["default_layer_weights"] is None


def test_wic_threshold_finds_the_planted_layer(wic_dirs):
    train, held_out, pairs = wic_dirs
    labels = {}
    for first, p1, s1, second, p2, s2 in pairs:
        labels[(first, p1)], labels[(second, p2)] = s1, s2
    result = _quiet(tasks="wic", bilm=PlantedFeatures(labels, layer=2, noise=0.1), train=train.parent, eval=held_out)
    scores = result["wic"].scores
    assert scores["layer 2"] > 95 and scores["layer 0"] < 70 and scores["layer 1"] < 70
    assert scores["majority"] == 50.0


def test_result_records_sizes_model_and_provenance_and_writes_the_report(upos_files, tmp_path):
    train, held_out, sentences = upos_files
    result = _quiet(tasks="upos", bilm=planted_tags(sentences, layer=0), train=train, eval=held_out,
                    train_fraction=0.5, seed=3, output=tmp_path / "out")
    record = json.loads((tmp_path / "out" / "probe.json").read_text())
    assert record["tasks"][0]["sizes"]["train_sentences"] == 40 and record["settings"]["seed"] == 3
    assert record["model"]["weights_sha256"] == "planted"
    assert {"command", "start_commit", "commit", "cpu", "date"} <= set(record["provenance"])
    assert record["provenance"]["model"] is None and "given in Python" in record["provenance"]["model_note"]
    assert set(record["provenance"]["data"]) == {portable_path(train), portable_path(held_out)}
    table = (tmp_path / "out" / "probe.md").read_text()
    assert result.table() in table and "| layer 0 (char-CNN, no context) |" in table
    assert (tmp_path / "out" / "probe.png").is_file()


def test_report_skips_the_plot_without_matplotlib(upos_files, tmp_path, monkeypatch, capsys):
    import sys

    train, held_out, sentences = upos_files
    result = _quiet(tasks="upos", bilm=planted_tags(sentences, layer=0), train=train, eval=held_out, max_sentences=10)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now fails
    written = write_report(result, tmp_path / "out")
    assert [p.name for p in written] == ["probe.json", "probe.md"]
    message = capsys.readouterr().err
    assert "probe.png: not plotted" in message and "spacy-elmo[plot]" in message


def test_fractions_and_tasks_share_one_forward_pass_per_sentence(upos_files):
    from spacy_elmo.probes.features import VectorCache
    from spacy_elmo.probes.tagging import probe_tagging
    from spacy_elmo.probes.task_data import load_task_data

    train, held_out, sentences = upos_files
    model = planted_tags(sentences, layer=0)
    cache = VectorCache(model, model_hash="planted", quiet=True)
    for fraction in (0.25, 0.5, 1.0):
        probe_tagging(load_task_data("upos", train, held_out, train_fraction=fraction), cache, seed=0)
    assert len(model.calls) == len(set(model.calls)) == len(set(sentences))


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"tasks": "pos"}, ValueError, "unknown probe task pos"),
        ({"tasks": "all", "train": "x.conllu"}, ValueError, "give one task"),
        ({"tasks": "upos", "train": "missing.conllu"}, FileNotFoundError, "missing.conllu not found"),
        ({"tasks": "upos", "train_fraction": 0.0}, ValueError, "train fraction must be in"),
    ],
)
def test_bad_requests_are_clear_errors(upos_files, kwargs, error, message):
    train, held_out, sentences = upos_files
    defaults = {"bilm": planted_tags(sentences, layer=0), "train": train, "eval": held_out}
    with pytest.raises(error, match=message):
        _quiet(**{**defaults, **kwargs})


def test_missing_default_data_names_the_path_and_the_way_out(tmp_path, upos_files):
    with pytest.raises(FileNotFoundError, match=r"default train data of 'upos', the project.yml asset .*--data-dir DIR.*--train FILE"):
        _quiet(tasks="upos", bilm=planted_tags(upos_files[2], layer=0), data_dir=tmp_path / "nowhere")


def test_empty_eval_file_is_a_clear_error(upos_files, tmp_path):
    train, _, sentences = upos_files
    (tmp_path / "empty.conllu").write_text("")
    with pytest.raises(ValueError, match="empty.conllu is empty"):
        _quiet(tasks="upos", bilm=planted_tags(sentences, layer=0), train=train, eval=tmp_path / "empty.conllu")
