import json
from collections import Counter

import pytest

from lab.corpus import mix_corpus



def _corpus(root, shards, dev="held out .\n"):
    train = root / "pretrain" / "train"
    train.mkdir(parents=True)
    for index, lines in enumerate(shards):
        (train / f"train-{index:02d}.txt").write_text("".join(line + "\n" for line in lines), encoding="utf8")
    (root / "pretrain" / "dev.txt").write_text(dev, encoding="utf8")
    return root


def test_mix_adds_copies_of_shared_sentences_only(tmp_path):
    wide = _corpus(tmp_path / "wide", [["a b c .", "new text here ."], ["old one .", "more new ."]], dev="wide dev .\n")
    # "removed ." was dropped from the wide corpus (a duplicate or evaluation text): it must not come back
    (wide / "ATTRIBUTION.md").write_text("# Sources\n\n- a source.\n", encoding="utf8")
    old = _corpus(tmp_path / "old", [["old one .", "a b c .", "removed ."]])
    out = tmp_path / "mixed"
    assert mix_corpus.main(["--corpus", str(wide), "--replay", str(old), "--times", "2", "--output", str(out)]) == 0
    shards = sorted((out / "pretrain" / "train").glob("*.txt"))
    assert [p.name for p in shards] == ["train-00.txt", "train-01.txt"]
    lines = [line for p in shards for line in p.read_text(encoding="utf8").splitlines()]
    assert Counter(lines) == {"a b c .": 3, "old one .": 3, "new text here .": 1, "more new .": 1}
    assert (out / "pretrain" / "dev.txt").read_text(encoding="utf8") == "wide dev .\n"
    stats = json.loads((out / "mix-stats.json").read_text(encoding="utf8"))
    assert stats["replayed"] == {"sentences": 2, "tokens": 7, "extra_copies": 2}
    assert stats["train"] == {"sentences": 8, "tokens": 28}
    assert stats["replay_share_of_tokens"] == pytest.approx(21 / 28, abs=1e-4)
    assert (out / "READY").read_text() == "28\n"
    attribution = (out / "ATTRIBUTION.md").read_text(encoding="utf8")
    assert attribution.startswith("# Sources\n\n- a source.\n") and "repeated 2 more time(s)" in attribution
    assert stats["provenance"]["data"] and stats["corpus_sha256"]


def test_mix_is_seeded_and_times_zero_keeps_the_corpus(tmp_path):
    lines = [f"sentence number {i} ." for i in range(50)]
    wide = _corpus(tmp_path / "wide", [lines])
    old = _corpus(tmp_path / "old", [lines[:10]])
    first = mix_corpus.mix(lines, lines[:10], times=0, seed=3)["lines"]
    assert sorted(first) == sorted(lines) and first != lines
    assert mix_corpus.mix(lines, lines[:10], times=0, seed=3)["lines"] == first
    assert mix_corpus.mix(lines, lines[:10], times=0, seed=4)["lines"] != first
    with pytest.raises(ValueError, match="times"):
        mix_corpus.mix(lines, lines, times=-1, seed=0)
    with pytest.raises(SystemExit, match="new folder"):
        mix_corpus.main(["--corpus", str(wide), "--replay", str(old), "--output", str(wide)])


def test_mix_names_a_folder_without_shards(tmp_path):
    empty = tmp_path / "empty"
    (empty / "pretrain" / "train").mkdir(parents=True)
    old = _corpus(tmp_path / "old", [["x ."]])
    with pytest.raises(SystemExit, match="no training shards"):
        mix_corpus.main(["--corpus", str(empty), "--replay", str(old), "--output", str(tmp_path / "out")])
