"""The embed-corpus benchmarks' parts: the corpus cut to a token count across its files, some
compressed; the bytes a token of every setting, the default codec's below plain values."""
import gzip
import json

from bench.bench_embed_defaults import SOURCES, write_corpus
from bench.bench_embed_sizing import main

from ..conftest import TINY

WORDS = "the bank of the river holds a boat and the money".split()


def data_folder(root, lines=40):
    """Stand-ins for the datasets the benchmarks read, under their names, each line eleven tokens."""
    for name, _ in SOURCES:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(" ".join(WORDS[i % 3:] + WORDS[: i % 3]) + "\n" for i in range(lines)), encoding="utf-8")
    return root


def test_the_corpus_is_cut_at_the_token_count_and_the_marked_files_are_gz(tmp_path):
    found = write_corpus(data_folder(tmp_path / "data"), tmp_path / "corpus", 1005)
    assert found["tokens"] == 1012 and found["files"] == 3 and found["lines"] == 92
    assert sorted(p.name for p in (tmp_path / "corpus").iterdir()) == [
        "austen-emma.txt", "austen-persuasion.txt.gz", "melville-moby_dick.txt.gz"]
    assert len(gzip.decompress((tmp_path / "corpus" / "melville-moby_dick.txt.gz").read_bytes()).decode().splitlines()) == 12


def test_every_setting_has_its_bytes_a_token_and_zstd_split_beats_plain_values(tmp_path, monkeypatch):
    import bench.bench_embed_sizing as sizing

    # the tiny published pair in place of the shipped model: a small width, the same code
    from spacy_elmo.io import load_allennlp

    monkeypatch.setattr(sizing, "resolve_bilm", lambda *_: load_allennlp(TINY / "options.json", TINY / "weights.hdf5"))
    out = tmp_path / "sizing.json"
    main(["--tokens", "shipped=600", "--shard-rows", "20", "--data-dir", str(data_folder(tmp_path / "data")),
          "--json", str(out)])
    record = json.loads(out.read_text(encoding="utf-8"))
    model = record["models"]["shipped"]
    assert len(model["settings"]) == 3 * 3 * 5 and model["memory"]["added_by_model_and_first_shard_mib"] > 0
    by = record["by_setting"]["shipped"]
    for setting in model["settings"]:
        assert setting["bytes_per_token"] == setting["bytes"] / model["corpus"]["tokens"]
    assert by["all float32 zstd"]["bytes"] < by["all float32 zstd plain"]["bytes"] < by["all float32 none plain"]["bytes"]
    assert by["top float16 none plain"]["raw_bytes_per_token"] == 2 * model["width"]
