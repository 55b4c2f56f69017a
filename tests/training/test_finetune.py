import hashlib
import json

import warnings

import pytest
import torch

from spacy_elmo.bilm.softmax import WordSoftmax
from spacy_elmo.io import ModelFileError, load_allennlp, load_native
from spacy_elmo.io import loading
from spacy_elmo.io.loading import shipped_model_dir
from spacy_elmo.pipeline import create_pipeline
from spacy_elmo.training.lm import LanguageModel
from spacy_elmo.training.model_dir import load_lm_parts
from spacy_elmo.training.perplexity import evaluate_perplexity
from spacy_elmo.training.finetune import finetune
from spacy_elmo.training.pretrain import pretrain
from spacy_elmo.training.vocab import Vocab

from spacy_elmo.training.config import load_lm_config

from .conftest import TINY_CFG, tiny_config, write_corpus

ROOT_DATA = TINY_CFG.parents[1] / "tests" / "data" / "allennlp" / "tiny"


def _domain(tmp_path, n, name):
    """Another 'domain': the same words in new patterns (the ring counted backwards, in pairs)."""
    ring = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven"]
    lines = []
    for i in range(n):
        start = (i * 5) % len(ring)
        words = [ring[(start - k) % len(ring)] for k in range(4 + i % 4)]
        lines.append(" ".join(w for w in words for _ in range(2)))
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_finetune_our_model_keeps_its_vocabulary_and_lowers_domain_perplexity(lm_corpus, tmp_path):
    train, dev = lm_corpus
    pretrain(tiny_config(train, dev, training__max_epochs=1), tmp_path / "pre")
    domain_train, domain_dev = _domain(tmp_path, 200, "d-train.txt"), _domain(tmp_path, 30, "d-dev.txt")
    config = tiny_config(domain_train, domain_dev, training__max_steps=40, training__eval_frequency=20)
    result = finetune(config, tmp_path / "ft", model=tmp_path / "pre" / "model-best")
    assert not result.new_softmax
    assert Vocab.from_disk(tmp_path / "ft" / "model-best").tokens == Vocab.from_disk(tmp_path / "pre" / "model-best").tokens
    assert result.after["ppl"] < 0.7 * result.before["ppl"]
    report = json.loads((tmp_path / "ft" / "finetune-report.json").read_text())
    assert report["before"]["ppl"] == pytest.approx(result.before["ppl"]) and report["after_best"]["ppl"] == pytest.approx(result.after["ppl"])
    weights = hashlib.sha256((tmp_path / "pre" / "model-best" / "model.safetensors").read_bytes()).hexdigest()
    assert report["provenance"]["model"]["weights_sha256"] == weights  # the model it started from
    assert len(report["provenance"]["data"]) == 2  # train and dev
    # the weights it left, and where this invocation began (tokens and seconds are from there)
    for name in ("model-best", "model-last"):
        written = hashlib.sha256((tmp_path / "ft" / name / "model.safetensors").read_bytes()).hexdigest()
        assert report["weights_sha256"][name] == written
    assert report["start_step"] == 0 and report["steps"] == 40
    assert load_native(tmp_path / "ft" / "model-last").config == load_native(tmp_path / "pre" / "model-best").config


def test_finetune_a_published_pair_builds_and_warms_up_a_softmax(tmp_path):
    domain_train, domain_dev = _domain(tmp_path, 200, "d-train.txt"), _domain(tmp_path, 30, "d-dev.txt")
    options, weights = ROOT_DATA / "options.json", ROOT_DATA / "weights.hdf5"
    config = tiny_config(domain_train, domain_dev, training__max_steps=80, training__eval_frequency=20, finetune__warmup_steps=10)
    result = finetune(config, tmp_path / "ft", options=options, weights=weights)
    assert result.new_softmax and result.after["ppl"] < result.before["ppl"]
    vocab = Vocab.from_disk(tmp_path / "ft")
    assert "eleven" in vocab and len(vocab) == 3 + 12
    # the warm-up trained the softmax only: the biLM left it as imported
    original = load_allennlp(options, weights).state_dict()
    warmed = load_native(tmp_path / "ft" / "warmup" / "model-last").state_dict()
    for name, value in original.items():
        assert torch.equal(value, warmed[name]), name
    tuned = load_native(tmp_path / "ft" / "model-last").state_dict()
    assert any(not torch.equal(original[name], tuned[name]) for name in original)
    # "before" is the imported biLM's perplexity with its warmed-up softmax, not a random head's
    assert result.before["softmax"] == "warmed up"
    bilm, vocab, head = load_lm_parts(tmp_path / "ft" / "warmup" / "model-last")
    softmax = WordSoftmax(len(vocab), bilm.config.projection_dim)
    softmax.load_state_dict(head)
    lines = [line.split() for line in domain_dev.read_text(encoding="utf-8").splitlines()]
    warmed_ppl = evaluate_perplexity(LanguageModel(bilm, softmax), lines, vocab).to_dict()["ppl"]
    assert result.before["ppl"] == pytest.approx(warmed_ppl, rel=1e-4)


def test_finetune_starts_from_a_pipeline_directory_with_a_new_softmax(tmp_path):
    options, weights = ROOT_DATA / "options.json", ROOT_DATA / "weights.hdf5"
    create_pipeline(load_allennlp(options, weights)).to_disk(tmp_path / "pipeline")
    bilm, vocab, head = load_lm_parts(tmp_path / "pipeline")
    assert vocab is None and head is None and _same_weights(bilm, load_allennlp(options, weights))
    domain_train, domain_dev = _domain(tmp_path, 40, "d-train.txt"), _domain(tmp_path, 10, "d-dev.txt")
    config = tiny_config(domain_train, domain_dev, training__max_steps=2, training__eval_frequency=2)
    result = finetune(config, tmp_path / "ft", model=tmp_path / "pipeline")
    assert result.new_softmax and result.summary.steps == 2
    assert load_native(tmp_path / "ft" / "model-last").config == bilm.config


def test_finetune_starts_from_the_shipped_biLM_with_its_vocabulary_and_softmax():
    bilm, vocab, head = load_lm_parts()
    assert _same_weights(bilm, load_native(shipped_model_dir()))
    assert vocab is not None and head["weight"].shape == (len(vocab), bilm.config.projection_dim)


def test_finetune_refuses_a_mistyped_start_naming_it_without_downloading(lm_corpus, tmp_path, monkeypatch):
    monkeypatch.setattr(loading, "fetch_published", lambda *a, **k: pytest.fail(f"download asked for: {a}"))
    train, dev = lm_corpus
    typo = str(tmp_path / "pre" / "modle-best")
    with pytest.raises(ModelFileError, match="no such file or directory") as err:
        finetune(tiny_config(train, dev), tmp_path / "ft", model=typo)
    assert err.value.path == typo
    with pytest.raises(ValueError, match="^finetune: options and weights must both be given"):
        finetune(tiny_config(train, dev), tmp_path / "ft2", options=ROOT_DATA / "options.json")


def _same_weights(a, b) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


EFML_MODEL = TINY_CFG.parents[1] / "tests" / "data" / "elmoformanylangs" / "model"


def test_finetune_an_elmoformanylangs_model_on_its_own_ids_with_a_new_softmax(tmp_path):
    from spacy_elmo.io import load_efml

    domain_train, domain_dev = _domain(tmp_path, 200, "d-train.txt"), _domain(tmp_path, 30, "d-dev.txt")
    config = tiny_config(domain_train, domain_dev, training__max_steps=60, training__eval_frequency=20,
                         finetune__warmup_steps=10)
    result = finetune(config, tmp_path / "ft", model=EFML_MODEL)
    assert result.new_softmax and result.after["ppl"] < result.before["ppl"]
    imported, tuned = load_efml(EFML_MODEL), load_native(tmp_path / "ft" / "model-best")
    assert tuned.char_vocab.to_json() == imported.char_vocab.to_json()  # the learned vocabulary travels with it
    assert any(not torch.equal(value, tuned.state_dict()[name]) for name, value in imported.state_dict().items())
    sentence = [["zero", "eleven", "ten", "Москва"]]
    assert tuned.embed(sentence)[0].shape == imported.embed(sentence)[0].shape
    with pytest.raises(ValueError, match='training.mode = "sentences"'):
        finetune(tiny_config(domain_train, domain_dev, training__max_steps=2, training__mode="windows"),
                 tmp_path / "ft-windows", model=EFML_MODEL)


def test_finetune_trains_with_its_own_recipe_unless_the_command_line_sets_one(lm_corpus):
    from spacy_elmo.training.finetune import finetune_recipe

    train, dev = lm_corpus
    settings, line = finetune_recipe(tiny_config(train, dev))
    assert (settings.optimizer, settings.learning_rate, settings.warmup_steps) == ("adam", 0.01, 0)
    assert "[finetune]'s recipe" in line
    settings, line = finetune_recipe(tiny_config(train, dev, training__learning_rate=0.003))
    assert (settings.optimizer, settings.learning_rate) == ("adam", 0.003) and "--training.learning_rate as given" in line
    settings, line = finetune_recipe(tiny_config(train, dev, finetune__recipe="training"))
    assert (settings.optimizer, settings.learning_rate) == ("adagrad", 0.2) and "[training]'s settings" in line
    small = load_lm_config(TINY_CFG.parent / "bilm-small.cfg", {})
    settings, _ = finetune_recipe(small)
    assert (settings.optimizer, settings.learning_rate, settings.warmup_steps, settings.lr_schedule) == (
        "adam", 0.0007, 30, "constant")


@pytest.mark.parametrize("has_bf16, expected", [(True, "bf16"), (False, "off")])
def test_the_recipes_precision_is_bf16_where_the_cpu_has_bf16_arithmetic(monkeypatch, has_bf16, expected):
    from spacy_elmo.fast import precision
    from spacy_elmo.training.finetune import finetune_recipe

    monkeypatch.setattr(precision, "cpu_has_bf16", lambda: has_bf16)
    small = load_lm_config(TINY_CFG.parent / "bilm-small.cfg", {})
    settings, line = finetune_recipe(small, "cpu")
    assert settings.autocast == expected
    assert ("bf16 autocast (auto: this device has bf16 arithmetic)" if has_bf16 else "float32 (auto: this device has no") in line
    # the command line's precision is the run's, whatever the CPU
    given = load_lm_config(TINY_CFG.parent / "bilm-small.cfg", {"training.autocast": "off"})
    settings, line = finetune_recipe(given, "cpu")
    assert settings.autocast == "off" and "--training.autocast as given" in line and "auto:" not in line


@pytest.mark.parametrize("bf16_factor, expected", [(1.5, "off"), (0.6, "bf16")])
def test_the_recipes_auto_precision_is_timed_on_the_models_shape(monkeypatch, tmp_path, bf16_factor, expected):
    """Given the biLM's shape, "auto" trains in bf16 only where its training products run faster in
    bf16 here (timed once, then kept); the log line says what was timed."""
    from spacy_elmo.fast import precision, train_payoff
    from spacy_elmo.training.finetune import finetune_recipe

    monkeypatch.setenv("SPACY_ELMO_KERNELS", str(tmp_path / "kernels"))
    monkeypatch.delenv(train_payoff.ENV, raising=False)
    monkeypatch.setattr(precision, "cpu_has_bf16", lambda: True)
    timed = []
    monkeypatch.setattr(train_payoff, "time_products",
                        lambda *shape: timed.append(shape) or ([100.0] * 7, [100.0 * bf16_factor] * 7))
    small = load_lm_config(TINY_CFG.parent / "bilm-small.cfg", {})
    settings, line = finetune_recipe(small, "cpu", (512, 128))
    assert settings.autocast == expected and timed == [(512, 128, small.training.batch_size)]
    assert f"auto: bf16's training products ran at {1 / bf16_factor:.2f}x float32's here; timed now, kept in" in line
    settings, line = finetune_recipe(small, "cpu", (512, 128))
    assert settings.autocast == expected and len(timed) == 1 and "; as timed before," in line
    # a resumed run goes on in the precision its checkpoints recorded, whatever the timing says now
    settings, line = finetune_recipe(small, "cpu", (512, 128), resumed="bf16")
    assert settings.autocast == "bf16" and "as the run being resumed began" in line and len(timed) == 1
    # asked for on the command line: not timed for the choice, and bf16 warned of where it is slower
    given = load_lm_config(TINY_CFG.parent / "bilm-small.cfg", {"training.autocast": "bf16"})
    settings, line = finetune_recipe(given, "cpu", (512, 128))
    assert settings.autocast == "bf16" and "auto:" not in line and len(timed) == 1


def test_bf16_asked_for_where_it_trains_slower_is_warned_of_and_kept(monkeypatch, tmp_path):
    from spacy_elmo.fast import precision, train_payoff
    from spacy_elmo.training.distributed import DistInfo
    from spacy_elmo.training.setup import warn_if_bf16_is_slower

    monkeypatch.setenv("SPACY_ELMO_KERNELS", str(tmp_path / "kernels"))
    monkeypatch.delenv(train_payoff.ENV, raising=False)
    monkeypatch.setattr(precision, "cpu_has_bf16", lambda: True)
    factor = {"bf16": 1.5}
    monkeypatch.setattr(train_payoff, "time_products", lambda *shape: ([100.0] * 7, [100.0 * factor["bf16"]] * 7))
    cpu = torch.device("cpu")
    with pytest.warns(RuntimeWarning, match=r"bf16 autocast, as asked, is slower than float32 here: bf16's training products ran at 0.67x"):
        warn_if_bf16_is_slower("bf16", cpu, (64, 32), 512, DistInfo())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warn_if_bf16_is_slower("off", cpu, (64, 32), 512, DistInfo())
        warn_if_bf16_is_slower("bf16", cpu, (64, 32), 512, DistInfo(rank=0, world_size=2))  # not timed per process
        factor["bf16"] = 0.5
        warn_if_bf16_is_slower("bf16", cpu, (128, 32), 512, DistInfo())
    # asked for in [finetune] or on the command line, not chosen by "auto": finetune warns as pretrain does
    from spacy_elmo.training.finetune import _auto_chose

    small = TINY_CFG.parent / "bilm-small.cfg"
    assert _auto_chose(load_lm_config(small, {}))
    assert not _auto_chose(load_lm_config(small, {"finetune.autocast": "bf16"}))
    assert not _auto_chose(load_lm_config(small, {"training.autocast": "bf16"}))
    assert not _auto_chose(load_lm_config(small, {"finetune.recipe": "training"}))


def _new_words_domain(tmp_path, n, name):
    """A domain of known words and new ones (animals the pretraining text never had)."""
    animals = ["zebra", "okapi", "quagga", "tapir", "gnu"]
    lines = [f"the {animals[i % 5]} sees the {animals[(i + 2) % 5]} ." for i in range(n)]
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_finetune_grows_the_vocabulary_reports_the_shared_vocabulary_and_keeps_language_and_vectors(
    lm_corpus, tmp_path, monkeypatch,
):
    import io

    from spacy_elmo.bilm import VectorSetting
    from spacy_elmo.io.loading import locate_bilm
    from spacy_elmo.io.native import read_config
    from spacy_elmo.io.vector_file import write_vector_setting
    import importlib

    finetune_module = importlib.import_module("spacy_elmo.training.finetune")

    train, dev = lm_corpus
    pretrain(tiny_config(train, dev, training__max_steps=30, corpus__lang="en"), tmp_path / "pre", stream=io.StringIO())
    start = tmp_path / "pre" / "model-best"
    assert locate_bilm(start).language == "en"  # pretraining recorded the text's language
    sha = read_config(start)["weights_sha256"]
    write_vector_setting(VectorSetting((0.0, 0.5, 0.5), None, sha, {"chosen_by": "a test"}), start)
    domain, domain_dev = _new_words_domain(tmp_path, 120, "d.txt"), _new_words_domain(tmp_path, 20, "d-dev.txt")
    general = write_corpus(tmp_path / "general.txt", 40, seed=5)
    monkeypatch.setattr(finetune_module, "FORGETTING_WARN", 0.0)  # any rise warns here
    log = io.StringIO()
    config = tiny_config(domain, domain_dev, training__max_steps=12, training__eval_frequency=6, finetune__add_words=4,
                         finetune__add_min_count=2, finetune__general=str(general))
    result = finetune(config, tmp_path / "ft", model=start, stream=log)
    said = log.getvalue()
    assert "vocabulary: 4 domain words added" in said and "fitted from the token encoder" in said
    old, grown = Vocab.from_disk(start), Vocab.from_disk(tmp_path / "ft" / "model-best")
    assert len(grown) == len(old) + 4 and grown.tokens[: len(old)] == old.tokens
    assert set(grown.tokens[len(old):]) < {"zebra", "okapi", "quagga", "tapir", "gnu"}
    report = json.loads((tmp_path / "ft" / "finetune-report.json").read_text())
    assert report["vocabulary"]["added"] == 4 and report["vocabulary"]["old_size"] == len(old)
    # the domain: OOV fell with the new words; the shared vocabulary's perplexity compares before and after
    assert report["domain"]["before"]["oov_rate"] == pytest.approx(2 / 6)  # two animals in each 6-token line
    assert report["domain"]["after"]["oov_rate"] < report["domain"]["before"]["oov_rate"]
    assert "ppl_shared" in report["domain"]["before"] and "ppl_shared" in report["domain"]["after"]
    assert report["domain"]["before"]["tokens_shared"] == report["domain"]["after"]["tokens_shared"]
    general_report = report["general"]
    assert general_report["ratio_of"] == "ppl_shared"
    assert general_report["ratio"] == pytest.approx(general_report["after"]["ppl_shared"] / general_report["before"]["ppl_shared"])
    assert result.general == general_report and "general held-out perplexity after fine-tuning" in said
    assert "warning: general held-out perplexity more than doubled" in said
    assert "training corpus: tokenizer: whitespace: the text reads as pre-tokenized" in said
    # the fine-tuned model keeps the start's language and its vector setting, marked as carried over
    assert locate_bilm(tmp_path / "ft" / "model-best").language == "en"
    assert report["lang"] == "en"
    tuned = load_native(tmp_path / "ft" / "model-best")
    assert tuned.vector_setting is not None and tuned.vector_setting.layer_weights == (0.0, 0.5, 0.5)
    carried = tuned.vector_setting.provenance["carried_over"]
    assert carried["from_weights_sha256"] == sha and tuned.vector_setting.weights_sha256 != sha

    # resumed, it reads back the grown vocabulary (its checkpoint holds the new rows)
    more = tiny_config(domain, domain_dev, training__max_steps=16, training__eval_frequency=6, finetune__add_words=4,
                       finetune__add_min_count=2, finetune__general=str(general))
    again = finetune(more, tmp_path / "ft", model=start, resume=True, stream=io.StringIO())
    assert again.summary.start_step == 12 and again.summary.steps == 16
    assert Vocab.from_disk(tmp_path / "ft" / "model-last").tokens == grown.tokens


def test_the_shipped_general_text_is_there_with_its_attribution():
    from spacy_elmo.training.finetune import GENERAL_TEXTS, general_text

    path = GENERAL_TEXTS["en"]
    lines = path.read_text(encoding="utf-8").splitlines()
    assert len(lines) > 1000 and all(line.strip() for line in lines)
    assert "CC BY-SA 4.0" in (path.parent / "ATTRIBUTION.md").read_text(encoding="utf-8")
    config = load_lm_config(TINY_CFG.parent / "bilm-small.cfg", {})
    assert general_text(config, "en")[0] == str(path)
    none, note = general_text(config, "de")
    assert none is None and "none shipped for the model's language (de)" in note
    from spacy_elmo.training.finetune import REPLAY_TEXTS, replay_text

    replayed = REPLAY_TEXTS["en"].read_text(encoding="utf-8").splitlines()
    # EWT train: the held-out half of EWT test shares with it only e-mail sign-offs ("Thanks .", "Vince ,")
    # and a rule of underscores
    shared = {line for line in set(replayed) & set(lines) if len(set(line.split())) > 3}
    assert len(replayed) > 10000 and not shared
    assert replay_text(config, "en")[0] == str(REPLAY_TEXTS["en"])
    assert replay_text(config, "de")[0] is None


def test_a_finetune_with_domain_words_resumes_to_the_weights_of_a_run_never_stopped(lm_corpus, tmp_path):
    """The grown head replaces the start's in the same language model: dropout hooked once, so a
    resumed run replays the steps as the first run trained them."""
    import io

    from safetensors.torch import load_file

    train, dev = lm_corpus
    pretrain(tiny_config(train, training__max_steps=10), tmp_path / "pre", stream=io.StringIO())
    domain, domain_dev = _new_words_domain(tmp_path, 80, "d.txt"), _new_words_domain(tmp_path, 10, "d-dev.txt")

    def config(steps):
        return tiny_config(domain, domain_dev, training__max_steps=steps, training__checkpoint_frequency=6,
                           training__dropout=0.3, finetune__add_words=3, finetune__add_min_count=2)

    finetune(config(12), tmp_path / "ref", model=tmp_path / "pre" / "model-last", stream=io.StringIO())
    finetune(config(6), tmp_path / "run", model=tmp_path / "pre" / "model-last", stream=io.StringIO())
    finetune(config(12), tmp_path / "run", model=tmp_path / "pre" / "model-last", resume=True, stream=io.StringIO())
    for name in ("model.safetensors", "softmax.safetensors"):
        ref, run = (load_file(str(tmp_path / side / "model-last" / name)) for side in ("ref", "run"))
        assert ref.keys() == run.keys() and all(torch.equal(ref[k], run[k]) for k in ref), name


class _CtrlCAtStep:
    """A log stream that presses Ctrl-C (SIGINT to this process) when the loop logs ``step``."""

    def __init__(self, step: int) -> None:
        self.step, self.lines = step, []

    def write(self, text: str) -> None:
        import os
        import signal

        self.lines.append(text)
        if text.startswith((f"step {self.step} ", f"step {self.step}/")):
            os.kill(os.getpid(), signal.SIGINT)

    def flush(self) -> None:
        pass


def test_ctrl_c_stops_a_finetune_after_its_step_with_a_checkpoint_that_resume_continues(lm_corpus, tmp_path):
    import io
    import signal

    from spacy_elmo.training.checkpoints import latest_checkpoint

    train, dev = lm_corpus
    pretrain(tiny_config(train, training__max_steps=4), tmp_path / "pre", stream=io.StringIO())
    # checkpoints far apart, as in a real run: without the one Ctrl-C writes, --resume would start over
    config = tiny_config(train, dev, training__max_steps=8, training__log_frequency=1, training__checkpoint_frequency=100)
    pressed = _CtrlCAtStep(3)
    # Ctrl-C as a terminal gives it: Python's own handler (a test before may have left another, as
    # pyspark's SparkContext does)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        result = finetune(config, tmp_path / "ft", model=tmp_path / "pre" / "model-last", stream=pressed)
        handler_after = signal.getsignal(signal.SIGINT)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert result.summary.stopped_by == "interrupted" and result.summary.steps == 3
    assert result.after is None  # the scores after come when a resumed run ends, not the best so far
    assert result.summary.stop_text == "Ctrl-C"
    assert any("interrupted at step 3" in line and "--resume" in line for line in pressed.lines)
    # no held-out evaluation came before Ctrl-C: model-best is the last model, and the line says so
    assert any("interrupted at step 3" in line and "no held-out evaluation yet: model-best is the last model, unevaluated"
               in line for line in pressed.lines)
    assert hashlib.sha256((tmp_path / "ft" / "model-best" / "model.safetensors").read_bytes()).digest() == hashlib.sha256(
        (tmp_path / "ft" / "model-last" / "model.safetensors").read_bytes()).digest()
    assert latest_checkpoint(tmp_path / "ft" / "checkpoints").step == 3
    assert (tmp_path / "ft" / "model-last").is_dir() and not (tmp_path / "ft" / "finetune-report.json").exists()
    assert handler_after is signal.default_int_handler  # the loop gives Ctrl-C back to Python

    said = io.StringIO()
    again = finetune(config, tmp_path / "ft", model=tmp_path / "pre" / "model-last", resume=True, stream=said)
    assert "holds no checkpoint yet" not in said.getvalue()
    assert again.summary.start_step == 3 and again.summary.steps == 8 and again.summary.stopped_by == "max_steps"
    assert (tmp_path / "ft" / "finetune-report.json").is_file()


def test_a_resumed_finetune_goes_on_in_the_precision_its_checkpoints_recorded(lm_corpus, tmp_path, monkeypatch):
    """"auto" decides once: a resumed run takes the precision the run began in, whatever the timing
    would say now (another thread count, the check switched off, a kernel folder it cannot keep)."""
    import io

    from spacy_elmo.fast import train_payoff
    from spacy_elmo.training.checkpoints import newest_extra

    train, dev = lm_corpus
    pretrain(tiny_config(train, training__max_steps=2), tmp_path / "pre", stream=io.StringIO())
    timed = []

    def choice(autocast):
        return lambda *args: timed.append(args) or train_payoff.Choice(autocast == "bf16", train_payoff.MEASURED,
                                                                       {"fp32_us": [1.0], "bf16_us": [2.0], "rows": 8})

    monkeypatch.setattr(train_payoff, "choose", choice("off"))
    config = tiny_config(train, dev, finetune__autocast="auto", training__max_steps=2, training__checkpoint_frequency=1)
    finetune(config, tmp_path / "ft", model=tmp_path / "pre" / "model-last", stream=io.StringIO())
    assert newest_extra(tmp_path / "ft" / "checkpoints")["finetune_recipe"]["autocast"] == "off" and len(timed) == 1
    monkeypatch.setattr(train_payoff, "choose", choice("bf16"))  # the timing would now take bf16
    said = io.StringIO()
    more = tiny_config(train, dev, finetune__autocast="auto", training__max_steps=3, training__checkpoint_frequency=1)
    again = finetune(more, tmp_path / "ft", model=tmp_path / "pre" / "model-last", resume=True, stream=said)
    assert "float32 (auto: as the run being resumed began, its checkpoints say)" in said.getvalue()
    assert again.summary.start_step == 2 and len(timed) == 1
    assert newest_extra(tmp_path / "ft" / "checkpoints")["finetune_recipe"]["autocast"] == "off"


def test_resume_without_a_checkpoint_says_the_finetune_starts_from_the_beginning(lm_corpus, tmp_path):
    import io

    train, dev = lm_corpus
    pretrain(tiny_config(train, training__max_steps=4), tmp_path / "pre", stream=io.StringIO())
    said = io.StringIO()
    result = finetune(tiny_config(train, dev, training__max_steps=2), tmp_path / "ft", model=tmp_path / "pre" / "model-last",
                      resume=True, stream=said)
    assert "holds no checkpoint yet; fine-tuning starts from the beginning" in said.getvalue()
    assert result.summary.start_step == 0 and result.summary.steps == 2


def _messy_domain(tmp_path, name):
    """The domain text as users have it: a byte order mark, CRLF, blank lines, an over-long line,
    bytes that are not UTF-8 and invisible characters stuck to words; animal words new to the start."""
    animals = ["zebra", "okapi", "quagga", "tapir", "gnu"]
    good = [f"the {animals[i % 5]} sees the {animals[(i + 2) % 5]} .".encode("utf-8") for i in range(60)]
    odd = ["the \u200dzebra sees the okapi\u202e .", "the caf\u00e9 sees the \U0001F600 ."]
    lines = good[:30] + [b"", b"  "] + [b"the \xff\xfe sees the gnu ."] * 4 + [b"x " * 12000] + good[30:]
    lines += [line.encode("utf-8") for line in odd for _ in range(4)] + [b""]
    path = tmp_path / name
    path.write_bytes(b"\xef\xbb\xbf" + b"\r\n".join(lines) + b"\r\n")
    return path


def test_finetune_from_a_model_with_its_softmax_reports_what_the_messy_text_held_and_adds_no_damaged_word(lm_corpus, tmp_path):
    import io

    train, dev = lm_corpus
    pretrain(tiny_config(train, training__max_steps=4), tmp_path / "pre", stream=io.StringIO())
    start = tmp_path / "pre" / "model-last"
    domain, domain_dev = _messy_domain(tmp_path, "messy.txt"), _new_words_domain(tmp_path, 10, "d-dev.txt")

    def config(add_words):
        return tiny_config(domain, domain_dev, training__max_steps=2, finetune__add_words=add_words, finetune__add_min_count=3,
                           corpus__tokenizer="whitespace", corpus__sentences="lines")

    said = io.StringIO()
    finetune(config(20), tmp_path / "ft", model=start, stream=said)
    log = said.getvalue()
    stats = json.loads((tmp_path / "ft" / "corpus-stats.json").read_text())
    assert stats["stats"]["skipped"] == {"empty": 3, "too_long": 1} and stats["stats"]["undecodable"] == 4
    assert stats["stats"]["first_undecodable"] == "messy.txt:33" and stats["stats"]["lines"] == 76
    assert stats["read_by"] == "counted in the pass for [finetune] add_words" and stats["provenance"]["data"]
    assert ("skipped 4 lines (3 empty, 1 too_long); 4 lines with bytes that are not UTF-8, replaced by U+FFFD "
            "(the first: messy.txt:33;") in log
    grown = Vocab.from_disk(tmp_path / "ft" / "model-last")
    old = Vocab.from_disk(start)
    added = grown.tokens[len(old):]
    assert {"zebra", "okapi", "caf\u00e9", "\U0001F600"} <= set(added)  # the text's own words, emoji and accents too
    assert not any(unfit in word for word in grown.tokens for unfit in ("\ufffd", "\ufeff", "\u200d", "\u202e"))
    assert "vocabulary: 3 words outside it passed over, not added (12 occurrences; 3 seen 3+ times)" in log
    report = json.loads((tmp_path / "ft" / "finetune-report.json").read_text())
    assert report["vocabulary"]["passed_over"]["format"]["words"] == 2
    assert report["vocabulary"]["passed_over"]["replaced"]["examples"] == ["\\ufffd\\ufffd"]

    # no domain words to count: the lines are read once for the counts, and the log says what that took
    said = io.StringIO()
    finetune(config(0), tmp_path / "ft0", model=start, stream=said)
    stats = json.loads((tmp_path / "ft0" / "corpus-stats.json").read_text())
    assert stats["stats"]["skipped"] == {"empty": 3, "too_long": 1} and stats["stats"]["segments"] is None
    assert stats["read_by"].startswith("a pass reading its lines, not tokenized, which took ")
    assert "training corpus: 76 lines; skipped 4 lines" in said.getvalue() and "which took" in said.getvalue()
    # resumed, the counts of the run's start are said again, not read anew
    said = io.StringIO()
    finetune(tiny_config(domain, domain_dev, training__max_steps=3, corpus__tokenizer="whitespace", corpus__sentences="lines"),
             tmp_path / "ft0", model=start, resume=True, stream=said)
    assert "training corpus (as read when the run began, corpus-stats.json): 76 lines; skipped 4 lines" in said.getvalue()


def test_finetune_without_a_dev_text_says_at_the_start_what_model_best_is_and_reports_no_domain_perplexity(lm_corpus, tmp_path):
    import io

    train, _ = lm_corpus
    pretrain(tiny_config(train, training__max_steps=2), tmp_path / "pre", stream=io.StringIO())
    said = io.StringIO()
    result = finetune(tiny_config(train, training__max_steps=2), tmp_path / "ft", model=tmp_path / "pre" / "model-last",
                      stream=said)
    first = said.getvalue().splitlines()
    warning = [line for line in first if line.startswith("warning: no held-out text")]
    assert warning == ["warning: no held-out text ([paths] dev, --paths.dev): model-best will be the last model, not one "
                       "chosen by held-out perplexity; and no domain perplexity before or after fine-tuning is reported"]
    assert first.index(warning[0]) < next(i for i, line in enumerate(first) if line.startswith("training from step"))
    assert result.before is None and result.after is None
