"""The benchmarks read their text from files named by options (defaults: the project's data folder, as
the probes find it: --data-dir, $SPACY_ELMO_DATA, ./assets/datasets; --quick runs: the sample shipped
in the repository); a missing file is an error that says how to get it."""
import re
import shutil
from pathlib import Path

import pytest

from bench import bench_pipeline, bench_train, workloads
from spacy_elmo.probes.task_data import DATA_ENV, FETCH

SAMPLE_TEST = workloads.REPO / "sample" / "ewt" / "test.conllu"


def _data_folder(root):
    """A data folder laid out as assets/datasets, holding the shipped sample under EWT's asset names."""
    ewt = root / "ud_english_ewt"
    ewt.mkdir(parents=True)
    for split in ("train", "dev", "test"):
        shutil.copy(workloads.REPO / "sample" / "ewt" / f"{split}.conllu", ewt / f"en_ewt-ud-{split}.conllu")
    return root


def test_default_is_the_project_data_folder_as_the_probes_find_it(monkeypatch, tmp_path):
    monkeypatch.delenv(DATA_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    assert workloads.default_ewt("test") == tmp_path / "assets" / "datasets" / "ud_english_ewt" / "en_ewt-ud-test.conllu"
    data = _data_folder(tmp_path / "mirror")
    monkeypatch.setenv(DATA_ENV, str(data))
    assert workloads.default_ewt("train") == data / "ud_english_ewt" / "en_ewt-ud-train.conllu"
    sentences, source = workloads.benchmark_sentences(10)
    assert len(sentences) == 10 and all(20 <= len(s) <= 30 for s in sentences)
    # outside the checkout, a data file is named by its asset, not by this machine's folders
    assert source.startswith("the datasets folder's ud_english_ewt/en_ewt-ud-test.conllu, first 10")
    assert workloads.frequent_tokens(5)[:2] == [".", "the"]


def test_data_dir_and_quick_choose_the_files_and_a_named_file_wins(monkeypatch, tmp_path):
    monkeypatch.delenv(DATA_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    data = _data_folder(tmp_path / "data")
    parse = lambda *argv: _parser().parse_args(list(argv))  # noqa: E731
    args = workloads.resolve_data_options(parse("--data-dir", str(data)))
    assert args.test_data == data / "ud_english_ewt" / "en_ewt-ud-test.conllu"
    assert args.train_data == data / "ud_english_ewt" / "en_ewt-ud-train.conllu"
    args = workloads.resolve_data_options(parse("--quick"))  # a smoke run needs no download
    assert (args.test_data, args.train_data) == (SAMPLE_TEST, workloads.REPO / "sample" / "ewt" / "train.conllu")
    args = workloads.resolve_data_options(parse("--quick", "--data-dir", str(data), "--test-data", str(SAMPLE_TEST)))
    assert args.test_data == SAMPLE_TEST and args.train_data.parent == data / "ud_english_ewt"
    args = workloads.resolve_data_options(parse())
    assert args.test_data == tmp_path / "assets" / "datasets" / "ud_english_ewt" / "en_ewt-ud-test.conllu"


def _parser():
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    workloads.add_data_options(parser, test=True, train=True)
    return parser


def test_a_missing_default_names_its_asset_and_how_to_fetch_it(monkeypatch, tmp_path):
    monkeypatch.delenv(DATA_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FileNotFoundError) as caught:
        workloads.benchmark_sentences(4)
    message = str(caught.value)
    assert "${vars.datasets}/ud_english_ewt/en_ewt-ud-test.conllu" in message and FETCH in message
    assert "--data-dir" in message and DATA_ENV in message and "--test-data" in message
    # a folder named is used even by a smoke run, and its missing file is reported the same way
    with pytest.raises(FileNotFoundError, match="empty/ud_english_ewt/en_ewt-ud-train.conllu.*project.yml asset"):
        bench_train.main(["--quick", "--data-dir", str(tmp_path / "empty")])


def test_a_missing_file_is_an_error_not_a_substitute(tmp_path):
    missing = tmp_path / "absent.conllu"
    with pytest.raises(FileNotFoundError, match="--test-data"):
        bench_pipeline.main(["--quick", "--test-data", str(missing)])
    with pytest.raises(FileNotFoundError, match="--train-data"):
        bench_train.main(["--quick", "--train-data", str(missing)])
    with pytest.raises(FileNotFoundError, match="absent.conllu"):
        workloads.frequent_tokens(5, missing)
    with pytest.raises(ValueError, match="sentences of 20-30 tokens"):
        workloads.benchmark_sentences(10**6, SAMPLE_TEST)


def test_sources_name_no_machine_paths(tmp_path):
    _, source = workloads.benchmark_sentences(4, SAMPLE_TEST)
    assert source.startswith("sample/ewt/test.conllu")
    elsewhere = tmp_path / "corpus.conllu"
    shutil.copy(SAMPLE_TEST, elsewhere)
    assert workloads.display_path(elsewhere) == "corpus.conllu"
    for module in Path(workloads.__file__).parent.glob("*.py"):
        text = module.read_text(encoding="utf-8")
        assert not re.search(r"""["'](/work|/home|/root|/tmp)/""", text), module.name
        assert not re.search(r"""\.\./shared|["']shared["']\s*/""", text), module.name


def test_work_done_counts_distinct_and_uncached_tokens():
    config = workloads.SHAPES["tiny"]
    runs = [workloads.char_batch([["a", "b", "a"], ["a", "c"]], config.max_characters_per_token)]
    flops = workloads.flops_per_position(config)
    plain = workloads.work_done(config, runs)
    # positions: 5 tokens + 2 boundaries per sentence; distinct: a, b, c, <S>, </S>
    assert (plain["positions"], plain["distinct_tokens"], plain["uncached_tokens"]) == (9, 5, 5)
    assert plain["nominal_flops"] == 9 * flops["total"]
    cached = workloads.work_done(config, runs, ["a", "b"])
    assert cached["uncached_tokens"] == 1  # only "c": the cache holds the boundaries too
    assert plain["done_flops"] - cached["done_flops"] == 4 * flops["char_cnn"]
    assert cached["removed_fraction"] > plain["removed_fraction"] > 0
