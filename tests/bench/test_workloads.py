"""The benchmarks read their text from files named by options (defaults: ../shared/datasets beside
the checkout, else the sample shipped in the repository); a missing file is an error."""
import re
from pathlib import Path

import pytest

from bench import bench_pipeline, bench_train, workloads


def test_default_is_the_shared_treebank_beside_the_checkout_or_the_shipped_sample(monkeypatch, tmp_path):
    shared = tmp_path / "shared" / "datasets" / "ud_english_ewt"
    shared.mkdir(parents=True)
    monkeypatch.setattr(workloads, "SHARED_EWT", shared)
    assert workloads.default_ewt("test") == shared / "en_ewt-ud-test.conllu"
    monkeypatch.setattr(workloads, "SHARED_EWT", tmp_path / "absent")
    assert workloads.default_ewt("test") == workloads.REPO / "sample" / "ewt" / "test.conllu"
    sentences, source = workloads.benchmark_sentences(10)
    assert len(sentences) == 10 and all(20 <= len(s) <= 30 for s in sentences)
    assert source.startswith("sample/ewt/test.conllu")
    assert workloads.frequent_tokens(5)[:2] == [".", "the"]


def test_a_missing_file_is_an_error_not_a_substitute(tmp_path):
    missing = tmp_path / "absent.conllu"
    with pytest.raises(FileNotFoundError, match="--test-data"):
        bench_pipeline.main(["--quick", "--test-data", str(missing)])
    with pytest.raises(FileNotFoundError, match="--train-data"):
        bench_train.main(["--quick", "--train-data", str(missing)])
    with pytest.raises(FileNotFoundError, match="absent.conllu"):
        workloads.frequent_tokens(5, missing)
    with pytest.raises(ValueError, match="sentences of 20-30 tokens"):
        workloads.benchmark_sentences(10**6, workloads.REPO / "sample" / "ewt" / "test.conllu")


def test_sources_name_no_machine_paths():
    _, source = workloads.benchmark_sentences(4)
    assert not source.startswith("/")
    for module in Path(workloads.__file__).parent.glob("*.py"):
        text = module.read_text(encoding="utf-8")
        assert not re.search(r"""["'](/work|/home|/root|/tmp)/""", text), module.name


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
