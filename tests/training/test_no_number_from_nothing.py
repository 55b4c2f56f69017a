"""No number from nothing: a training or held-out text with nothing to learn from or score is
refused before training, with the reason, and no model is written; a held-out text wholly
outside the vocabulary gets no perplexity, and one 10% or more outside it a warning."""
import io
import subprocess

import pytest

from spacy_elmo.training.corpus import Corpus, UnusableCorpus, check_usable
from spacy_elmo.training.finetune import finetune
from spacy_elmo.training.perplexity import AllOutOfVocabulary, oov_rate_checked, oov_warning
from spacy_elmo.training.pretrain import pretrain
from spacy_elmo.training.setup import TimeSpent

from .conftest import PYTHON, ROOT, TINY_CFG, cli_env, tiny_config, write_corpus


def _unusable(tmp_path):
    """name -> a training corpus with no usable line, and the words its refusal says."""
    folder = tmp_path / "bad"
    folder.mkdir()
    empty = folder / "empty.txt"
    empty.write_text("", encoding="utf-8")
    blank = folder / "blank.txt"
    blank.write_text("\n  \n\n", encoding="utf-8")
    long = folder / "long.txt"
    long.write_text("word " * 30 + "\n" + "x" * 200 + "\n", encoding="utf-8")  # every line over 100 characters
    latin = folder / "latin.txt"
    latin.write_bytes("caf\xe9 na\xefve\n\xe0 la carte\n".encode("latin-1"))
    return {
        "empty": (empty, "the corpus is empty"),
        "blank": (blank, "every line is empty"),
        "long": (long, "every line is over [corpus] max_line_chars (100 characters)"),
        "latin": (latin, "unreadable: every line held bytes that are not UTF-8"),
    }


def test_check_usable_names_why_a_corpus_gives_nothing(tmp_path):
    for name, (path, reason) in _unusable(tmp_path).items():
        with pytest.raises(UnusableCorpus, match="no usable training corpus") as info:
            check_usable(Corpus(path, max_line_chars=100))
        assert reason in str(info.value), name
    good = tmp_path / "good.txt"
    good.write_text("\n\n" + "x" * 200 + "\nthe cat sat\n", encoding="utf-8")
    stats = check_usable(Corpus(good, max_line_chars=100))
    assert stats.segments == 1  # it stopped at the first usable line


@pytest.mark.parametrize("name", ["empty", "blank", "long", "latin"])
def test_pretrain_refuses_an_unusable_corpus_before_writing_anything(tmp_path, name):
    path, reason = _unusable(tmp_path)[name]
    out = tmp_path / "out"
    with pytest.raises(UnusableCorpus, match="no usable training corpus") as info:
        pretrain(tiny_config(path, corpus__max_line_chars=100), out, stream=io.StringIO())
    assert reason in str(info.value)
    assert not out.exists()


def test_an_unusable_held_out_text_or_vocabulary_is_refused_too(lm_corpus, tmp_path):
    train, _ = lm_corpus
    empty = tmp_path / "dev.txt"
    empty.write_text("\n", encoding="utf-8")
    with pytest.raises(UnusableCorpus, match=r"no usable held-out text \(\[paths\] dev\)"):
        pretrain(tiny_config(train, empty), tmp_path / "a", stream=io.StringIO())
    assert not (tmp_path / "a").exists()
    with pytest.raises(UnusableCorpus, match="no word is seen .vocab. min_count = 1000 times"):
        pretrain(tiny_config(train, vocab__min_count=1000), tmp_path / "b", stream=io.StringIO())
    assert not (tmp_path / "b" / "model-last").exists() and not (tmp_path / "b" / "model-best").exists()


def test_a_held_out_text_outside_the_vocabulary_is_refused_before_training_and_warned_of_when_high(lm_corpus, tmp_path):
    train, _ = lm_corpus
    foreign = tmp_path / "foreign.txt"
    foreign.write_text("zebra quagga okapi\ngnu yak\n", encoding="utf-8")
    with pytest.raises(AllOutOfVocabulary, match="all 5 tokens are outside the model's vocabulary"):
        pretrain(tiny_config(train, foreign, training__max_steps=4), tmp_path / "out", stream=io.StringIO())
    assert not (tmp_path / "out" / "model-best").exists() and not (tmp_path / "out" / "checkpoints").exists()

    mixed = tmp_path / "mixed.txt"
    mixed.write_text("the big cat sees the dog zebra\n", encoding="utf-8")  # 1 word in 7 unknown
    log = io.StringIO()
    pretrain(tiny_config(train, mixed, training__max_steps=2), tmp_path / "ok", stream=log)
    assert "14.3% of its tokens are outside the vocabulary (>= 10%)" in log.getvalue()
    assert "perplexity is flattered" in log.getvalue()


def test_oov_rate_checks():
    assert oov_rate_checked(1, 20) == 0.05 and oov_warning(0.05) is None
    assert "10.0% of its tokens" in oov_warning(0.1, what="t")
    with pytest.raises(AllOutOfVocabulary):
        oov_rate_checked(3, 3)
    with pytest.raises(ValueError, match="no tokens"):
        oov_rate_checked(0, 0)


def test_finetune_refuses_an_unusable_domain_text_before_writing_anything(lm_corpus, tmp_path):
    train, dev = lm_corpus
    pretrain(tiny_config(train, training__max_steps=4), tmp_path / "pre", stream=io.StringIO())
    path, reason = _unusable(tmp_path)["long"]
    with pytest.raises(UnusableCorpus, match=r"every line is over \[corpus\] max_line_chars"):
        finetune(tiny_config(path, dev, corpus__max_line_chars=100), tmp_path / "ft", model=tmp_path / "pre" / "model-last",
                 stream=io.StringIO())
    assert not (tmp_path / "ft").exists()


def test_finetune_refuses_a_held_out_text_outside_the_start_vocabulary_before_making_its_folder(lm_corpus, tmp_path):
    train, _ = lm_corpus
    pretrain(tiny_config(train, training__max_steps=4), tmp_path / "pre", stream=io.StringIO())
    foreign = tmp_path / "foreign.txt"
    foreign.write_text("zebra quagga okapi\ngnu yak\n", encoding="utf-8")
    with pytest.raises(AllOutOfVocabulary, match="all 5 tokens are outside the model's vocabulary"):
        finetune(tiny_config(train, foreign), tmp_path / "ft", model=tmp_path / "pre" / "model-last", stream=io.StringIO())
    # no folder with a vocabulary in it is left for a rerun to trip on
    assert not (tmp_path / "ft").exists()


def test_finetune_whose_time_limit_is_spent_before_training_writes_no_model_and_says_so(lm_corpus, tmp_path):
    train, dev = lm_corpus
    pretrain(tiny_config(train, training__max_steps=4), tmp_path / "pre", stream=io.StringIO())
    # a nanosecond is spent by loading the model alone: not one step could be taken
    with pytest.raises(TimeSpent, match=r"the time limit \(1e-09s\) was spent before training began"):
        finetune(tiny_config(train, dev), tmp_path / "ft", model=tmp_path / "pre" / "model-last", max_time=1e-9,
                 stream=io.StringIO())
    assert not (tmp_path / "ft" / "model-best").exists() and not (tmp_path / "ft" / "model-last").exists()
    run = subprocess.run(
        [PYTHON, "-m", "spacy_elmo", "finetune", str(TINY_CFG), "--model", str(tmp_path / "pre" / "model-last"),
         "--output", str(tmp_path / "cli"), "--paths.train", str(train), "--paths.dev", str(dev), "--max-time", "0.000000001"],
        env=cli_env(), cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert run.returncode == 1 and "Traceback" not in run.stderr
    assert "was spent before training began" in run.stderr and "no model written" in " ".join(run.stderr.split())
    assert not (tmp_path / "cli" / "model-best").exists()


@pytest.mark.parametrize("name", ["empty", "long"])
def test_the_commands_exit_non_zero_with_the_reason_and_write_no_model(tmp_path, name):
    path, reason = _unusable(tmp_path)[name]
    out = tmp_path / "out"
    run = subprocess.run(
        [PYTHON, "-m", "spacy_elmo", "pretrain", str(TINY_CFG), "--output", str(out), "--paths.train", str(path),
         "--corpus.max_line_chars", "100"],
        env=cli_env(), cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert run.returncode == 1, run.stderr[-2000:]
    assert reason in " ".join(run.stderr.split()) and "Traceback" not in run.stderr
    assert not out.exists()


def test_pretrain_refuses_an_empty_folder_with_a_message(tmp_path):
    (tmp_path / "empty").mkdir()
    run = subprocess.run(
        [PYTHON, "-m", "spacy_elmo", "pretrain", str(TINY_CFG), "--output", str(tmp_path / "out"),
         "--paths.train", str(tmp_path / "empty")],
        env=cli_env(), cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert run.returncode == 1 and "the folder holds no file to read" in run.stderr and "Traceback" not in run.stderr
    assert not (tmp_path / "out").exists()


def test_a_usable_corpus_still_trains(tmp_path):
    train = write_corpus(tmp_path / "train.txt", 50)
    summary = pretrain(tiny_config(train, training__max_steps=2), tmp_path / "out", stream=io.StringIO())
    assert summary.steps == 2 and (tmp_path / "out" / "model-last" / "config.json").is_file()
