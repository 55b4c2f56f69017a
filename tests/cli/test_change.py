"""`change`: the TSV of scores with each period's uses, Spearman and binary accuracy against gold
files, the record, and usages files as input."""
import json
import math

import pytest
from typer.testing import CliRunner

from spacy_elmo.cli import app
from spacy_elmo.io import load_bilm
from spacy_elmo.usage.change import ChangeSettings, change_scores
from spacy_elmo.usage.usages import collect_usages

from ..published_head import write_published_head

PERIOD_A = ["the cat sees a bird", "a big cat likes fish", "the cat likes a red fish", "the dog sees a bird"] * 3
PERIOD_B = ["the cat sees a bird", "a small cat sees the dog", "the red cat likes a dog", "the dog likes a fish"] * 3


@pytest.fixture()
def files(tmp_path):
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_text("\n".join(PERIOD_A) + "\n", encoding="utf-8")
    b.write_text("\n".join(PERIOD_B) + "\n", encoding="utf-8")
    (tmp_path / "targets.txt").write_text("cat\ndog\nfish\nbird\nzebra\n", encoding="utf-8")
    (tmp_path / "graded.txt").write_text("cat\t0.9\ndog\t0.5\nfish\t0.2\nbird\t0.1\nzebra\t0.3\n", encoding="utf-8")
    (tmp_path / "binary.txt").write_text("cat\t1\ndog\t1\nfish\t0\nbird\t0\nzebra\t0\n", encoding="utf-8")
    return tmp_path, write_published_head(tmp_path / "model")


def _table(text):
    rows = [line.split("\t") for line in text.strip().splitlines()]
    assert rows[0] == ["target", "score", "uses_a", "uses_b", "reason"]
    return {r[0]: (float(r[1]), int(r[2]), int(r[3])) for r in rows[1:]}


@pytest.mark.parametrize("metric", ["prt", "apd", "jsd"])
def test_change_prints_each_targets_score_and_uses_as_the_library_computes_them(files, metric):
    folder, model = files
    result = CliRunner().invoke(app, ["change", "--input", str(folder / "a.txt"), "--input", str(folder / "b.txt"), "--targets",
                                      str(folder / "targets.txt"), "--metric", metric, "--model", str(model)])
    assert result.exit_code == 0, result.output
    table = _table(result.stdout)
    bilm = load_bilm(model)
    targets = ["cat", "dog", "fish", "bird", "zebra"]
    a, b = (collect_usages(bilm, folder / name, targets) for name in ("a.txt", "b.txt"))
    expected = change_scores(a.vectors, b.vectors, targets, ChangeSettings(metric))
    for score in expected:
        got, uses_a, uses_b = table[score.target]
        assert (uses_a, uses_b) == (score.uses_a, score.uses_b)
        assert math.isnan(got) if math.isnan(score.score) else got == pytest.approx(score.score, abs=1e-6)
    assert table["cat"][1:] == (9, 9) and math.isnan(table["zebra"][0])


def test_gold_files_add_spearman_and_binary_accuracy_to_the_record(files):
    folder, model = files
    record = folder / "out" / "record.json"
    result = CliRunner().invoke(app, ["change", str(folder / "a.txt"), str(folder / "b.txt"), "--targets",
                                      str(folder / "targets.txt"), "--metric", "apd", "--model", str(model),
                                      "--gold", str(folder / "graded.txt"), "--binary", str(folder / "binary.txt"),
                                      "--output", str(folder / "out" / "scores.tsv"), "--record", str(record)])
    assert result.exit_code == 0, result.output
    written = json.loads(record.read_text(encoding="utf-8"))
    scores = {row["target"]: row["score"] for row in written["scores"]}
    assert scores["zebra"] is None and set(scores) == {"cat", "dog", "fish", "bird", "zebra"}
    from spacy_elmo.usage.ranking import accuracy, binary_labels, spearman

    scored = [t for t in ("cat", "dog", "fish", "bird")]
    expected = spearman([scores[t] for t in scored], [0.9, 0.5, 0.2, 0.1])
    assert written["evaluation"]["spearman"]["rho"] == pytest.approx(expected.rho)
    assert written["evaluation"]["spearman"]["targets"] == 4 and written["evaluation"]["spearman"]["without_score"] == 1
    assert not math.isnan(expected.rho)
    labels = binary_labels({**{t: scores[t] for t in scored}, "zebra": float("nan")})
    assert written["evaluation"]["binary"]["accuracy"] == accuracy(labels, {"cat": 1, "dog": 1, "fish": 0, "bird": 0, "zebra": 0})
    assert written["change"]["metric"] == "apd" and written["usages"]["layer"] == "top"
    assert written["provenance"]["model"]["weights_sha256"]
    assert _table((folder / "out" / "scores.tsv").read_text(encoding="utf-8"))["cat"][1:] == (9, 9)
    assert "is now --input" in result.output and "--record is now --output" in result.output
    again = CliRunner().invoke(app, ["change", "--input", str(folder / "a.txt"), "--input", str(folder / "b.txt"), "--targets",
                                     str(folder / "targets.txt"), "--metric", "apd", "--model", str(model),
                                     "--gold", str(folder / "graded.txt"), "--output", str(folder / "out" / "again.json")])
    assert again.exit_code == 0, again.output
    assert "the old spelling" not in again.output and _table(again.stdout)["cat"][1:] == (9, 9)
    rewritten = json.loads((folder / "out" / "again.json").read_text(encoding="utf-8"))
    assert rewritten["evaluation"]["spearman"] == written["evaluation"]["spearman"]


def test_usages_files_give_the_same_scores_as_the_corpora(files):
    folder, model = files
    runner = CliRunner()
    for name in ("a", "b"):
        made = runner.invoke(app, ["usages", "--input", str(folder / f"{name}.txt"), "--targets", str(folder / "targets.txt"),
                                   "--output", str(folder / f"{name}.parquet"), "--model", str(model)])
        assert made.exit_code == 0, made.output
    from_files = runner.invoke(app, ["change", "--input", str(folder / "a.parquet"), "--input", str(folder / "b.parquet"), "--targets",
                                     str(folder / "targets.txt"), "--metric", "prt"])
    from_corpora = runner.invoke(app, ["change", "--input", str(folder / "a.txt"), "--input", str(folder / "b.txt"), "--targets",
                                       str(folder / "targets.txt"), "--metric", "prt", "--model", str(model)])
    assert from_files.exit_code == 0, from_files.output
    files_table, corpora_table = _table(from_files.stdout), _table(from_corpora.stdout)
    assert files_table.keys() == corpora_table.keys()
    for target, (score, uses_a, uses_b) in corpora_table.items():
        assert files_table[target][1:] == (uses_a, uses_b)
        assert math.isnan(files_table[target][0]) if math.isnan(score) else files_table[target][0] == pytest.approx(score, abs=1e-5)


def test_bad_inputs_are_refused_with_a_message(files):
    one = CliRunner().invoke(app, ["change", "--input", str(files[0] / "a.txt"), "--targets", str(files[0] / "targets.txt")])
    assert one.exit_code == 2 and "--input A --input B" in " ".join(one.output.replace("│", " ").split())
    folder, model = files
    runner = CliRunner()
    unknown = runner.invoke(app, ["change", "--input", str(folder / "a.txt"), "--input", str(folder / "b.txt"), "--targets",
                                  str(folder / "targets.txt"), "--metric", "cosine", "--model", str(model)])
    assert unknown.exit_code == 2 and "metric must be one of" in " ".join(unknown.output.replace("│", " ").split())
    missing = runner.invoke(app, ["change", "--input", str(folder / "a.txt"), "--input", str(folder / "nope.txt"), "--targets",
                                  str(folder / "targets.txt"), "--model", str(model)])
    assert missing.exit_code == 2 and "nope.txt: no such file, folder or glob" in " ".join(missing.output.replace("│", " ").split())


def test_a_usages_file_without_a_target_is_refused(files):
    folder, model = files
    (folder / "few.txt").write_text("cat\n", encoding="utf-8")
    runner = CliRunner()
    made = runner.invoke(app, ["usages", "--input", str(folder / "a.txt"), "--targets", str(folder / "few.txt"),
                               "--output", str(folder / "a.parquet"), "--model", str(model)])
    assert made.exit_code == 0, made.output
    result = runner.invoke(app, ["change", "--input", str(folder / "a.parquet"), "--input", str(folder / "b.txt"), "--targets",
                                 str(folder / "targets.txt"), "--model", str(model)])
    said = " ".join(result.output.replace("│", " ").split())
    assert result.exit_code == 2 and "collected without the targets" in said


def test_without_the_usage_extra_change_stops_with_the_line_that_installs_it(files, without_statistics):
    folder, model = files
    result = CliRunner().invoke(app, ["change", "--input", str(folder / "a.txt"), "--input", str(folder / "b.txt"), "--targets",
                                      str(folder / "targets.txt"), "--model", str(model)])
    assert result.exit_code == 1 and result.stdout == ""
    [line] = result.stderr.splitlines()
    assert "scipy and scikit-learn" in line and line.endswith("pip install 'spacy-elmo[usage]'")


def _strict(text):
    def refuse(constant):
        raise ValueError(f"not strict JSON: {constant}")

    return json.loads(text, parse_constant=refuse)


def test_targets_without_a_score_are_named_with_why_on_stderr_and_in_the_record(files):
    folder, model = files
    record = folder / "out.json"
    result = CliRunner().invoke(app, ["change", "--input", str(folder / "a.txt"), "--input", str(folder / "b.txt"), "--targets",
                                      str(folder / "targets.txt"), "--model", str(model), "--output", str(record),
                                      "--output", str(folder / "out.tsv")])
    assert result.exit_code == 0, result.output
    assert "warning: 1 target without a score for too few uses (the first, 'zebra': too few uses: 0 in the first" in result.stderr
    written = _strict(record.read_text(encoding="utf-8"))
    [zebra] = [s for s in written["scores"] if s["target"] == "zebra"]
    assert zebra["score"] is None and zebra["reason"].startswith("too few uses")
    [cat] = [s for s in written["scores"] if s["target"] == "cat"]
    assert (cat["uses_a"], cat["seen_a"], cat["uses_b"], cat["seen_b"]) == (9, 9, 9, 9)
    summary = _strict(result.stderr.strip().splitlines()[-1])
    assert set(summary["without_score"]) == {"zebra"}
    assert (folder / "out.tsv").read_text(encoding="utf-8").splitlines()[-1].startswith("zebra\tnan\t0\t0\ttoo few uses")


def test_a_gold_covering_part_of_the_targets_spelled_otherwise_is_matched_and_warned_about(files):
    folder, model = files
    (folder / "part.txt").write_text("CAT\t0.9\nDog\t0.5\nfish\t0.2\n", encoding="utf-8")
    record = folder / "out.json"
    result = CliRunner().invoke(app, ["change", "--input", str(folder / "a.txt"), "--input", str(folder / "b.txt"), "--targets",
                                      str(folder / "targets.txt"), "--model", str(model), "--gold", str(folder / "part.txt"),
                                      "--output", str(record)])
    assert result.exit_code == 0, result.output
    assert "warning: the graded gold covers 3 of the 5 targets; not in it: bird, zebra" in result.stderr
    spearman = _strict(record.read_text(encoding="utf-8"))["evaluation"]["spearman"]
    assert spearman["targets"] == 3 and spearman["without_score"] == 0


def test_targets_that_differ_only_in_case_are_refused_before_any_model_runs(files):
    folder, model = files
    (folder / "cased.txt").write_text("cell\nCell\nCELL\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["change", "--input", str(folder / "a.txt"), "--input", str(folder / "b.txt"), "--targets",
                                      str(folder / "cased.txt"), "--model", str(model)])
    assert result.exit_code == 2 and "differ only in case" in " ".join(result.output.replace("│", " ").split())


def test_a_folder_input_reads_its_text_files_and_says_how_many_others_it_left(files):
    folder, model = files
    for name in ("period_a", "period_b"):
        (folder / name).mkdir()
        (folder / name / "corpus.txt").write_text((folder / f"{name[-1]}.txt").read_text(encoding="utf-8"), encoding="utf-8")
        (folder / name / "gold.csv").write_text("cat,1\n", encoding="utf-8")
        (folder / name / "meta.json").write_text('{"cat": 1}\n', encoding="utf-8")
    by_folder = CliRunner().invoke(app, ["change", "--input", str(folder / "period_a"), "--input", str(folder / "period_b"),
                                         "--targets", str(folder / "targets.txt"), "--model", str(model)])
    by_file = CliRunner().invoke(app, ["change", "--input", str(folder / "a.txt"), "--input", str(folder / "b.txt"),
                                       "--targets", str(folder / "targets.txt"), "--model", str(model)])
    assert by_folder.exit_code == 0, by_folder.output
    assert by_folder.stdout == by_file.stdout
    assert "4 files in input folders not read" in by_folder.stderr  # a .csv and a .json beside each period


def test_a_layer_the_model_lacks_is_refused_with_every_choice(files):
    folder, model = files
    result = CliRunner().invoke(app, ["change", "--input", str(folder / "a.txt"), "--input", str(folder / "b.txt"), "--targets",
                                      str(folder / "targets.txt"), "--model", str(model), "--layers", "5"])
    said = " ".join(result.output.replace("│", " ").split())
    assert result.exit_code == 2 and "'top' (the default" in said and "'mean'" in said and "from 0 to" in said


def test_the_record_says_how_many_uses_each_period_held_and_how_many_were_scored(files):
    folder, model = files
    record = folder / "capped.json"
    result = CliRunner().invoke(app, ["change", "--input", str(folder / "a.txt"), "--input", str(folder / "b.txt"), "--targets",
                                      str(folder / "targets.txt"), "--model", str(model), "--max-uses", "4", "--output", str(record)])
    assert result.exit_code == 0, result.output
    [cat] = [s for s in _strict(record.read_text(encoding="utf-8"))["scores"] if s["target"] == "cat"]
    assert (cat["uses_a"], cat["seen_a"], cat["uses_b"], cat["seen_b"]) == (4, 9, 4, 9)


def test_change_from_embed_corpus_folders_gives_the_scores_of_the_text_and_refuses_another_model(files, trained_paths):
    from ..embedded_folder import embed_here

    folder, model = files
    for name in ("a", "b"):
        (folder / name).mkdir()
        (folder / name / f"{name}.txt").write_bytes((folder / f"{name}.txt").read_bytes())
        embed_here(folder / name, folder / f"{name}-embedded", model, shard_rows=5)

    def run(a, b, *extra):
        return CliRunner().invoke(app, ["change", "--input", str(a), "--input", str(b), "--targets", str(folder / "targets.txt"),
                                        "--metric", "apd", *extra])

    from_text = run(folder / "a.txt", folder / "b.txt", "--model", str(model))
    from_folders = run(folder / "a-embedded", folder / "b-embedded", "--model", str(model))
    assert from_text.exit_code == 0 and from_folders.exit_code == 0, from_folders.output
    text, stored = _table(from_text.stdout), _table(from_folders.stdout)
    assert text.keys() == stored.keys() and text["cat"][1:] == stored["cat"][1:] == (9, 9)
    for target, (score, *uses) in text.items():
        assert math.isnan(score) if math.isnan(score) else stored[target][0] == pytest.approx(score, abs=1e-5)
    # without --model the folders' own; with another model, refused
    assert run(folder / "a-embedded", folder / "b-embedded").stdout == from_folders.stdout
    other = run(folder / "a-embedded", folder / "b-embedded", "--options", str(trained_paths[0]), "--weights", str(trained_paths[1]))
    assert other.exit_code == 2 and "not with the model given" in " ".join(other.output.replace("│", " ").split())
