import json

import pytest

from lab.campaign import report_results as report



def _write(folder, task, setting, pct, score, sentences):
    record = dict(task=task, setting=setting, fraction_pct=pct, score=score, train_sentences=sentences)
    (folder / f"{task}-{setting}-{pct}.json").write_text(json.dumps(record), encoding="utf-8")


def test_table_and_plot(tmp_path):
    metrics = tmp_path / "metrics"
    metrics.mkdir()
    for pct, sentences, plain, elmo in ((1, 125, 0.80, 0.86), (100, 12544, 0.95, 0.9612)):
        _write(metrics, "upos", "plain", pct, plain, sentences)
        _write(metrics, "upos", "elmo", pct, elmo, sentences)
    _write(metrics, "ner", "plain", 10, 0.5, 1404)
    report.main([str(metrics), "--table", str(tmp_path / "t.md"), "--plot", str(tmp_path / "p.png")])
    lines = (tmp_path / "t.md").read_text(encoding="utf-8").splitlines()
    assert lines[0] == "| task | train % | train sentences | without ELMo | with ELMo | ELMo - plain |"
    assert lines[2:] == [
        "| upos | 1 | 125 | 80.00 | 86.00 | +6.00 |",
        "| upos | 100 | 12,544 | 95.00 | 96.12 | +1.12 |",
        "| ner | 10 | 1,404 | 50.00 | - | - |",
    ]
    assert (tmp_path / "p.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_near_zero_baseline_is_said_under_the_table(tmp_path):
    metrics = tmp_path / "metrics"
    metrics.mkdir()
    for pct, sentences, plain, elmo in ((1, 10, 0.0, 0.0158), (10, 100, 0.0299, 0.0616), (100, 1000, 0.08, 0.2117)):
        _write(metrics, "ner", "plain", pct, plain, sentences)
        _write(metrics, "ner", "elmo", pct, elmo, sentences)
    _write(metrics, "upos", "plain", 1, 0.52, 10)
    report.main([str(metrics), "--table", str(tmp_path / "t.md")])
    text = (tmp_path / "t.md").read_text(encoding="utf-8")
    assert text.count("near-zero baseline") == 1  # NER only: UPOS's baseline works
    assert "**ner: near-zero baseline.** Without ELMo it scores 0.00 / 2.99 / 8.00 at 1% / 10% / 100% of train" in text
    assert text.splitlines()[-1].endswith("not a gain over a working baseline.")


def test_textcat_has_an_accuracy_and_a_macro_f1_row_under_the_other_tasks(tmp_path):
    metrics = tmp_path / "metrics"
    metrics.mkdir()
    _write(metrics, "upos", "plain", 1, 0.8, 125)
    for setting, accuracy, macro_f in (("plain", 0.7, 0.69), ("elmo", 0.75, 0.7466)):
        record = dict(
            task="textcat",
            setting=setting,
            fraction_pct=10,
            score=accuracy,
            train_sentences=5252,
            scores={"cats_accuracy": accuracy, "cats_macro_f": macro_f},
        )
        (metrics / f"textcat-{setting}-10.json").write_text(json.dumps(record), encoding="utf-8")
    report.main([str(metrics), "--table", str(tmp_path / "t.md"), "--plot", str(tmp_path / "p.png")])
    assert (tmp_path / "t.md").read_text(encoding="utf-8").splitlines()[2:] == [
        "| upos | 1 | 125 | 80.00 | - | - |",
        "| textcat accuracy | 10 | 5,252 | 70.00 | 75.00 | +5.00 |",
        "| textcat macro F1 | 10 | 5,252 | 69.00 | 74.66 | +5.66 |",
    ]


def test_records_holds_every_run_behind_the_table_with_provenance(tmp_path):
    metrics = tmp_path / "metrics"
    metrics.mkdir()
    _write(metrics, "upos", "plain", 10, 0.9, 1254)
    _write(metrics, "upos", "elmo", 10, 0.91, 1254)
    out = tmp_path / "results" / "runs.json"
    argv = [str(metrics), "--table", str(tmp_path / "t.md"), "--plot", str(tmp_path / "p.png"), "--records", str(out)]
    report.main(argv)
    written = json.loads(out.read_text(encoding="utf-8"))
    assert sorted((r["setting"], r["score"]) for r in written["runs"]) == [("elmo", 0.91), ("plain", 0.9)]
    command = written["provenance"]["command"]
    # no machine's directories: a path outside the checkout keeps its last three parts
    assert command.startswith("python -m lab.campaign.report_results ") and command.endswith(f"--records .../{tmp_path.name}/results/runs.json")
    assert written["provenance"]["date"] and written["provenance"]["started"]
    # runs recorded without their model and data: the report cannot name them, and says so
    assert "model" not in written["provenance"] and "data" not in written["provenance"]


def test_records_gather_the_runs_models_and_data(tmp_path):
    metrics = tmp_path / "metrics"
    metrics.mkdir()
    bilm = {"name": "en_small", "version": "0.6.0", "weights": "spacy_elmo/models/en_small/model.safetensors",
            "weights_sha256": "a" * 64}
    runs = {
        "plain": {"model": None, "model_note": "the plain setting: spaCy's own tok2vec, no biLM",
                  "data": {"corpus/upos-train-10.spacy": "b" * 64}},
        "elmo": {"model": bilm, "data": {"corpus/upos-train-10.spacy": "b" * 64, "corpus/upos-test.spacy": "c" * 64}},
    }
    for setting, record in runs.items():
        run = dict(task="upos", setting=setting, fraction_pct=10, score=0.9, train_sentences=1254, provenance=record)
        (metrics / f"upos-{setting}-10.json").write_text(json.dumps(run), encoding="utf-8")
    out = tmp_path / "runs.json"
    report.main([str(metrics), "--table", str(tmp_path / "t.md"), "--records", str(out)])
    record = json.loads(out.read_text(encoding="utf-8"))["provenance"]
    assert record["model"] == [bilm] and "plain setting" in record["model_note"]
    assert record["data"] == {"corpus/upos-test.spacy": "c" * 64, "corpus/upos-train-10.spacy": "b" * 64}


def test_variants_are_compared_by_dev_and_test_score(tmp_path):
    folders = {}
    for name, dev, test in (("input", 0.54, 0.51), ("both", 0.57, 0.55)):
        folders[name] = tmp_path / name
        folders[name].mkdir()
        record = dict(task="ner", setting="elmo", fraction_pct=1, score=test, dev_score=dev, train_sentences=140)
        (folders[name] / "ner-elmo-1.json").write_text(json.dumps(record), encoding="utf-8")
    record = dict(task="upos", setting="elmo", fraction_pct=1, score=0.88, train_sentences=125)
    (folders["both"] / "upos-elmo-1.json").write_text(json.dumps(record), encoding="utf-8")
    args = [f"{name}={folder}" for name, folder in folders.items()]
    report.main(args + ["--table", str(tmp_path / "t.md"), "--records", str(tmp_path / "r.json")])
    assert (tmp_path / "t.md").read_text(encoding="utf-8").splitlines() == [
        "| task | train % | setting | variant | dev | test |",
        "|---|---|---|---|---|---|",
        "| upos | 1 | elmo | both | - | 88.00 |",
        "| ner | 1 | elmo | input | 54.00 | 51.00 |",
        "| ner | 1 | elmo | both | 57.00 | 55.00 |",
    ]
    runs = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))["runs"]
    assert [(r["variant"], r["task"]) for r in runs] == [("input", "ner"), ("both", "ner"), ("both", "upos")]


def test_variants_need_a_name_each(tmp_path, capsys):
    for args in (["a=x", "y"], ["a=x", "a=y"], ["x", "y"]):
        with pytest.raises(SystemExit):
            report.main(args + ["--table", str(tmp_path / "t.md")])
    assert not (tmp_path / "t.md").exists()


def test_seeds_table_gives_each_run_the_mean_range_and_gain(tmp_path):
    folders = {}
    for name, scores in (("old-s0", 0.52), ("old-s1", 0.50), ("new-s0", 0.55), ("new-s1", 0.54), ("new-s2", 0.56)):
        folders[name] = tmp_path / name
        folders[name].mkdir()
        _write(folders[name], "ner", "elmo", 1, scores, 140)
    _write(folders["old-s0"], "ner", "elmo", 10, 0.70, 1404)  # a cell only one model has: left out
    plain = tmp_path / "plain"
    plain.mkdir()
    _write(plain, "ner", "plain", 1, 0.45, 140)
    _write(plain, "ner", "elmo", 1, 0.99, 140)  # an ELMo run in the plain folder is not one of the models'
    seeds = ["old=" + ",".join(str(folders[n]) for n in ("old-s0", "old-s1")),
             "new=" + ",".join(str(folders[n]) for n in ("new-s0", "new-s1", "new-s2"))]
    report.main(["--seeds", *seeds, "--plain", str(plain), "--table", str(tmp_path / "t.md"),
                 "--plot", str(tmp_path / "p.png"), "--records", str(tmp_path / "r.json")])
    lines = (tmp_path / "t.md").read_text(encoding="utf-8").splitlines()
    assert lines[0] == "| task | train % | model | runs | test scores | mean | range | mean - plain |"
    assert lines[2:] == [
        "| ner | 1 | old | 2 | 52.00, 50.00 | 51.00 | 2.00 | +6.00 |",
        "| ner | 1 | new | 3 | 55.00, 54.00, 56.00 | 55.00 | 2.00 | +10.00 |",
        "| ner | 1 | plain | 1 | 45.00 | 45.00 | 0.00 |  |",
    ]
    assert (tmp_path / "p.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    runs = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))["runs"]
    assert [(r["model"], r["score"]) for r in runs] == [
        ("old", 0.52), ("old", 0.50), ("new", 0.55), ("new", 0.54), ("new", 0.56), ("plain", 0.45)
    ]
    # the plain runs may also come from a report's --records file
    report.main(["--seeds", seeds[0], "--plain", str(tmp_path / "r.json"), "--table", str(tmp_path / "t2.md")])
    assert (tmp_path / "t2.md").read_text(encoding="utf-8").splitlines()[2] == "| ner | 1 | old | 2 | 52.00, 50.00 | 51.00 | 2.00 | +6.00 |"


def test_seeds_needs_name_and_folders(tmp_path):
    with pytest.raises(SystemExit):
        report.main(["--seeds", str(tmp_path), "--table", str(tmp_path / "t.md")])
    with pytest.raises(SystemExit):
        report.main(["--table", str(tmp_path / "t.md")])


def test_a_model_recorded_before_and_several_plain_runs_compare_seed_by_seed(tmp_path):
    """A report's --records file gives back each model's runs, one a seed (FILE#NAME), and the
    gain is over the mean of several plain runs, which get a row of their own."""
    def run(task, setting, score, seed=None, model=None):
        record = dict(task=task, setting=setting, fraction_pct=1, score=score, overrides={})
        if seed is not None:
            record["overrides"]["system.seed"] = seed
        return dict(record, model=model) if model else record
    earlier = tmp_path / "earlier.json"
    earlier.write_text(json.dumps({"runs": [
        run("ner", "elmo", 0.50, 0, "old"), run("ner", "elmo", 0.54, 1, "old"), run("ner", "elmo", 0.52, 2, "old"),
        run("ner", "elmo", 0.99, 0, "other"), run("ner", "plain", 0.44, model="plain"),
    ]}), encoding="utf-8")
    folders = []
    for seed, score in ((0, 0.51), (1, 0.55), (2, 0.56)):
        folder = tmp_path / f"new-s{seed}"
        folder.mkdir()
        _write(folder, "ner", "elmo", 1, score, 140)
        plain = tmp_path / f"plain-s{seed}"
        if seed:
            plain.mkdir()
            _write(plain, "ner", "plain", 1, 0.44 + 0.01 * seed, 140)
        folders.append(str(folder))
    plain_runs = f"{earlier}#plain,{tmp_path / 'plain-s1'},{tmp_path / 'plain-s2'}"
    report.main(["--seeds", f"old={earlier}#old", "new=" + ",".join(folders), "--plain", plain_runs,
                 "--table", str(tmp_path / "t.md"), "--records", str(tmp_path / "r.json")])
    assert (tmp_path / "t.md").read_text(encoding="utf-8").splitlines()[2:] == [
        "| ner | 1 | old | 3 | 50.00, 54.00, 52.00 | 52.00 | 4.00 | +7.00 |",
        "| ner | 1 | new | 3 | 51.00, 55.00, 56.00 | 54.00 | 5.00 | +9.00 |",
        "| ner | 1 | plain | 3 | 44.00, 45.00, 46.00 | 45.00 | 2.00 |  |",
    ]
    runs = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))["runs"]
    assert [(r["model"], r["run"], r["score"]) for r in runs][-3:] == [("plain", 0, 0.44), ("plain", 1, 0.45), ("plain", 2, 0.46)]
    with pytest.raises(ValueError, match="no runs of a model named 'missing'"):
        report.main(["--seeds", f"old={earlier}#missing", "--table", str(tmp_path / "t3.md")])
