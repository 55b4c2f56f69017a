"""Domain fine-tuning: continue language-model training of a trained biLM on new unlabeled text.

The start is any biLM ``io.loading.locate_bilm`` accepts (see ``load_lm_parts``):
our model directory, a spaCy pipeline, a published pair or name, or the shipped
English biLM. A start with a head (``io.lm_head``: our directory's vocabulary and
softmax, the shipped model's included, or a published softmax + vocabulary: a
folder or zip holding them beside the pair, or ``original`` / ``original-5.5b``)
continues with it, its whole vocabulary kept (as bilm-tf's restart-from-checkpoint
did): the perplexity before is then the head's own, the one ``evaluate`` gives,
and after training it is measured on the same vocabulary, so the two compare. A
head larger than ``SAMPLED_ABOVE`` words trains with the sampled softmax (as the
published models were trained; ``[softmax] n_samples`` candidates, or bilm-tf's
8,192 where that is 0): the full softmax's gradient would need (tokens x words)
floats. Restricting the head to the domain's words would be cheaper, but its
perplexity would be over another vocabulary and compare with nothing.

Any other start has no softmax, so a vocabulary is counted from the domain text
and a new softmax built for it; with ``[finetune] warmup_steps`` > 0 that softmax
first trains alone with the biLM frozen (else the random head's gradients would
wreck the pretrained LSTMs in the first steps). Held-out perplexity on
``[paths] dev`` is reported before and after.

The recipe is fine-tuning's own (``[finetune]``: Adam at a small rate with a linear warm-up, as
the main job fine-tunes), not [training]'s, which trains a model from scratch and, applied to a
trained one, wrecks what it knew of general text; the command line's ``--training.optimizer``,
``learning_rate``, ``warmup_steps`` or ``lr_schedule`` take precedence (``finetune_recipe``).
Before and after, a general held-out text (``[finetune] general``: the package ships one for
English, ``general_text``) is scored beside the domain's, with a warning where its perplexity
more than doubles. With ``[finetune] add_words`` the domain's frequent words join the
vocabulary and softmax first (``vocab_growth``), and both texts are also scored over the words
the old and new vocabularies share ("ppl_shared"), the figure that compares before and after.
The fine-tuned model keeps the start's language (config.json's extra "lang") and its default
vector setting (vectors.json, marked as carried over).

Whatever the start, DIR's corpus-stats.json and the log say what the training text held and what
of it was skipped (empty, over-long, malformed lines) or damaged (bytes that are not UTF-8): counted
in the pass that counts a new vocabulary or the domain's words, else in a pass reading the lines
alone, whose time the log gives (``_report_corpus``). Without ``[paths] dev`` the log warns at the
start that model-best will be the last model and no domain perplexity is reported; Ctrl-C before
any held-out evaluation leaves model-best the last model, unevaluated, and the log says so.
"""
import json
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple, Union

import torch

from ..fast import train_payoff
from ..fast.precision import BF16
from ..files import file_sha256, write_atomic
from ..bilm.softmax import DEFAULT_CHUNK_SIZE, WordSoftmax
from ..io.loading import PathLike
from ..io.native import WEIGHTS_NAME
from ..records.provenance import data_record, model_record, provenance
from .checkpoints import newest_extra
from .config import AUTOCASTS, RECIPE_KEYS, LMConfig, TrainingSettings
from .corpus import Corpus, CorpusStats, ReplayCorpus, check_usable, resolve_paths, split_long
from .counting import STATS_NAME, prepare_vocab
from .distributed import DistInfo, barrier, from_main, shutdown
from .lm import LanguageModel
from .loop import CHECKPOINTS, RunSummary, best_at_interrupt, train_lm
from .model_dir import load_lm_parts
from .perplexity import evaluate_perplexity, oov_rate_checked, oov_warning
from .setup import (
    check_autocast_device, check_held_out, check_output, check_time_left, config_corpus, dev_reader, has_checkpoints, logger, make_output, segment_reader,
    setup_process, train_corpus, warn_if_bf16_is_emulated, warn_if_bf16_is_slower,
)
from .vocab import VOCAB_NAME, Vocab
from .vocab_growth import PassedOver, domain_words, grow_vocabulary, shown

# a given head of more words than this trains with the sampled softmax: its full softmax's
# gradient would hold (tokens x words) floats
SAMPLED_ABOVE = DEFAULT_CHUNK_SIZE
# bilm-tf's n_negative_samples_batch, as the published models were trained
PUBLISHED_SAMPLES = 8192
REPORT_NAME = "finetune-report.json"


def _written_weights(output: Path) -> Dict[str, str]:
    """The SHA-256 of the weights this run left in model-best/ and model-last/."""
    files = {name: output / name / WEIGHTS_NAME for name in ("model-best", "model-last")}
    return {name: file_sha256(path) for name, path in files.items() if path.is_file()}
BEFORE_NAME = "before.json"
WARMUP_DIR = "warmup"
# the general held-out text the package ships (``lab/corpus/general_text.py`` builds it), by language
GENERAL_DIR = Path(__file__).resolve().parent / "general"
GENERAL_TEXTS = {"en": GENERAL_DIR / "en-ewt-test-half.txt"}
# the general text replayed among the domain's (``[finetune] replay = "shipped"``), by language
REPLAY_TEXTS = {"en": GENERAL_DIR / "en-ewt-train.txt"}
# general perplexity after over before above which the report warns that the model is forgetting
FORGETTING_WARN = 2.0


@dataclass
class FinetuneResult:
    before: Optional[Dict[str, float]]
    after: Optional[Dict[str, float]]
    summary: RunSummary
    new_softmax: bool
    # the general held-out text's scores before and after ({"before": ..., "after": ..., ...}); None without one
    general: Optional[Dict[str, Any]] = None
    # the domain's held-out scores of model-best, measured as "before" was (ppl_shared included)
    domain_after: Optional[Dict[str, Any]] = None


def finetune_recipe(config: LMConfig, device: Union[str, torch.device] = "cpu",
                    shape: Optional[Tuple[int, int]] = None, resumed: Optional[str] = None) -> Tuple[TrainingSettings, str]:
    """The [training] settings fine-tuning trains with: [training]'s, with the optimizer, learning
    rate, warm-up, schedule and precision of [finetune]'s recipe (unless ``recipe = "training"``),
    save those the command line or the caller's overrides set (``LMConfig.overridden``).

    device: where the run trains. shape: the biLM's LSTM (cells, projection): with it, ``autocast =
    "auto"`` is bf16 where the training products run faster in bf16 than in float32 on this machine
    (``fast.train_payoff.choose``: timed once per machine and kept); without it, bf16 wherever the
    device has bf16 arithmetic. resumed: the precision the checkpoints of a run being resumed recorded
    (``[training] autocast``'s word): "auto" takes it, so that the run goes on as it began.
    RETURNS (Tuple[TrainingSettings, str]): the settings and a line saying what the recipe is.
    """
    settings, recipe = config.training, config.finetune
    given = sorted(key for key in RECIPE_KEYS if f"training.{key}" in config.overridden)
    precision_note = ""
    if recipe.recipe == "finetune":
        autocast = recipe.autocast
        if autocast == "auto" and "autocast" not in given and resumed is not None:
            autocast, precision_note = resumed, " (auto: as the run being resumed began, its checkpoints say)"
        elif autocast == "auto" and "autocast" not in given:
            choice = _auto_precision(torch.device(device), shape, min(settings.batch_size, train_payoff.ROWS))
            autocast, precision_note = choice.autocast, f" ({choice.note()})"
        ours = {"optimizer": recipe.optimizer, "learning_rate": recipe.learning_rate,
                "warmup_steps": recipe.lr_warmup_steps, "lr_schedule": recipe.lr_schedule, "autocast": autocast}
        settings = replace(settings, **{key: value for key, value in ours.items() if key not in given})
        source = "[finetune]'s recipe" + (f", with --training.{', --training.'.join(given)} as given" if given else "")
    else:
        source = "[training]'s settings ([finetune] recipe = \"training\")"
    precision = "float32" if settings.autocast == "off" else f"{settings.autocast} autocast"
    line = (f"fine-tuning recipe: {settings.optimizer}, learning rate {settings.learning_rate:g}, linear warm-up over "
            f"{settings.warmup_steps} steps, then {settings.lr_schedule}; {precision}{precision_note} ({source})")
    return settings, line


def _auto_chose(config: LMConfig) -> bool:
    """Whether the run's precision is [finetune]'s "auto", not a word the user gave."""
    return (config.finetune.recipe == "finetune" and config.finetune.autocast == "auto"
            and "training.autocast" not in config.overridden)


def _resumed_autocast(output: Path) -> Optional[str]:
    """The precision the newest checkpoint in ``output`` recorded (its ``finetune_recipe``), if any."""
    recorded = newest_extra(output / CHECKPOINTS).get("finetune_recipe")
    autocast = recorded.get("autocast") if isinstance(recorded, dict) else None
    return autocast if autocast in AUTOCASTS else None


def _auto_precision(device: torch.device, shape: Optional[Tuple[int, int]], rows: int) -> train_payoff.Choice:
    """``autocast = "auto"``: timed on the biLM's shape where it is known, else by the device's arithmetic."""
    if shape is None:
        return train_payoff.Choice(BF16.pays_on(device), train_payoff.ASSUMED, {})
    return train_payoff.choose(shape[0], shape[1], rows, device)


def _chosen_text(choice: Optional[str], shipped: Dict[str, Path], language: Optional[str], what: str,
                 setting: str, described: str) -> Tuple[Optional[str], str]:
    """A ``[finetune]`` text setting resolved: null, a path, or "shipped" (the package's text for the
    model's language). RETURNS (Tuple[Optional[str], str]): a path (None: none) and a line saying which."""
    if choice is None:
        return None, f"{what}: none ([finetune] {setting} = null)"
    if choice != "shipped":
        return choice, f"{what}: {choice}"
    path = shipped.get(language or "")
    if path is None:
        return None, (f"{what}: none shipped for the model's language ({language or 'not recorded'}); set "
                      f"[finetune] {setting} to general text of that language")
    return str(path), f"{what}: the package's ({path.name}, {described})"


def general_text(config: LMConfig, language: Optional[str]) -> Tuple[Optional[str], str]:
    """The general held-out text to score before and after, and a line saying which (or why none).

    RETURNS (Tuple[Optional[str], str]): a path (None: none) and the note.
    """
    return _chosen_text(config.finetune.general, GENERAL_TEXTS, language, "general held-out text", "general",
                        "UD English EWT test, CC BY-SA 4.0")


def _general_corpus(config: LMConfig, path: str, language: Optional[str]) -> Corpus:
    """A general text as a corpus: a shipped one as it is (tokenized, one sentence a line), a given
    one as [corpus] says."""
    shipped = {text.resolve() for text in (*GENERAL_TEXTS.values(), *REPLAY_TEXTS.values())}
    if Path(path).resolve() in shipped:
        return Corpus(path, tokenizer="whitespace", lang=language)
    return config_corpus(config, path, lang=language)


def replay_text(config: LMConfig, language: Optional[str]) -> Tuple[Optional[str], str]:
    """The general text replayed among the domain's, and a line saying which (or why none).

    RETURNS (Tuple[Optional[str], str]): a path (None: no replay) and the note.
    """
    path, note = _chosen_text(config.finetune.replay, REPLAY_TEXTS, language, "replay", "replay",
                              "UD English EWT train, CC BY-SA 4.0")
    every = config.finetune.replay_every
    return path, note if path is None else f"{note}, one segment after every {every} of the domain's"


def start_language(source, record: Optional[Dict[str, Any]]) -> Optional[str]:
    """The start model's language: what its source says, else what its training recorded."""
    return getattr(source, "language", None) or (record or {}).get("lang")


def finetune(
    config: LMConfig,
    output: Path,
    *,
    model: Optional[PathLike] = None,
    options: Optional[PathLike] = None,
    weights: Optional[PathLike] = None,
    resume: bool = False,
    max_time: Optional[float] = None,
    device: str = "cpu",
    stream=None,
) -> FinetuneResult:
    """Fine-tune on ``config.train``; DIR gets model-last/, model-best/, checkpoints/ and finetune-report.json.

    model (Optional[PathLike]): where to start (see ``load_lm_parts``); with ``options`` and
        ``weights`` a published pair instead, and with none of them the shipped English biLM.
    The biLM architecture comes from the starting model; the config's [model] section is not used.
    max_time (Optional[float]): seconds for the invocation up to the end of training (warm-up and
        the held-out scores before included; the scores after are not).
    A training or held-out text with no usable line is refused before DIR is made, and a held-out
    text wholly outside the vocabulary before training: no model is written from nothing.
    """
    output = Path(output)
    check_output(output, resume=resume)
    started = time.monotonic()
    torch_device, info = setup_process(config, device)
    try:
        log = logger(info, stream)
        bilm, vocab, softmax_weights, source = load_lm_parts(
            model, options=options, weights=weights, what="finetune", with_source=True,
        )
        language = start_language(source, source.training_record())
        # the main process times the products (the others take the device's rule), then its choice is every process's
        shape = (bilm.config.dim, bilm.config.projection_dim) if info.is_main else None
        settings, recipe_line = finetune_recipe(config, torch_device, shape, _resumed_autocast(output) if resume else None)
        if info.enabled and _auto_chose(config):
            settings = replace(settings, autocast=AUTOCASTS[from_main(info, AUTOCASTS.index(settings.autocast), torch_device)])
        log(recipe_line)
        if settings.autocast != config.training.autocast:  # the recipe's precision, checked as [training]'s was
            check_autocast_device(settings.autocast, torch_device)
            warn_if_bf16_is_emulated(settings.autocast, torch_device)
        if not _auto_chose(config):  # bf16 asked for (the command line, [finetune] or [training]): kept, warned of
            warn_if_bf16_is_slower(settings.autocast, torch_device, (bilm.config.dim, bilm.config.projection_dim),
                                   settings.batch_size, info)
        corpus = train_corpus(config, lang=language, log=log)
        dev = dev_reader(config, lang=language, log=log,
                         without="; and no domain perplexity before or after fine-tuning is reported")
        general_path, general_line = general_text(config, language)
        log(general_line)
        general = None if general_path is None else segment_reader(_general_corpus(config, general_path, language),
                                                                    config, what="general held-out text", capped=False)
        replay_path, replay_line = replay_text(config, language)
        log(replay_line)
        training_text = corpus
        if replay_path is not None:
            replayed = _general_corpus(config, replay_path, language)
            check_usable(replayed, what="replay text")
            training_text = ReplayCorpus(corpus, replayed, config.finetune.replay_every)
        new_softmax = softmax_weights is None
        resuming = resume and has_checkpoints(output)
        if resume and not resuming:
            log(f"--resume: {output} holds no checkpoint yet; fine-tuning starts from the beginning")
        # a start with its own vocabulary scores the held-out texts with it: one wholly outside it
        # is refused before DIR is made (a new or resumed vocabulary is only known after)
        checked_early = not new_softmax and not resuming
        if checked_early:
            dev_oov = _check_held_out_texts(dev, general, vocab, log)
        make_output(output, info)
        # the words the start's vocabulary and a grown one share: its first ids (<UNK> left out)
        shared = None if new_softmax else len(vocab)
        if new_softmax:
            vocab, _ = prepare_vocab(corpus, config, output, info, resume=resume, log=log)
        elif resuming:
            vocab, softmax_weights = _resumed_vocabulary(vocab, softmax_weights, output)
            _report_corpus(corpus, output, info, log)
        elif info.is_main:
            vocab.to_disk(output)
        lm = LanguageModel(bilm, _softmax(bilm, vocab, softmax_weights, config), dropout=settings.dropout).to(torch_device)
        if not checked_early:
            dev_oov = _check_held_out_texts(dev, general, vocab, log)
        limit = config.training.max_time if max_time is None else max_time
        if resuming:
            before = (_saved_before(output) or {}).get("domain")
        else:
            warmed = new_softmax and config.finetune.warmup_steps > 0
            if warmed:
                # the "before" perplexity is the given biLM's: measured once its new softmax is
                # fitted (a random head would make any fine-tuning look like a huge gain)
                _warm_up(lm, vocab, corpus, config, settings, output, info, _remaining(limit, started), stream)
            when = "before fine-tuning" + (" (the biLM as given, its new softmax warmed up)" if warmed else "")
            if new_softmax and not warmed:
                when += " (untrained new softmax: not the biLM's perplexity)"
            # the start as given, its own vocabulary: the OOV rates and perplexities the domain words change
            before = _report_dev(lm, vocab, dev, info, log, when, shared=shared)
            general_before = _score(lm, vocab, general, info, shared=shared)
            growth = None
            if not new_softmax and config.finetune.add_words > 0:
                start_head = {name: tensor.detach().cpu() for name, tensor in lm.softmax.state_dict().items()}
                vocab, softmax_weights, growth = _grown(bilm, vocab, start_head, corpus, config, output, info, log)
                # the grown head replaces the start's in place: a second LanguageModel would hook its
                # dropout onto the same LSTM layers a second time
                lm.softmax = _softmax(bilm, vocab, softmax_weights, config).to(torch_device)
                if dev_oov is not None:
                    grown_oov = check_held_out(dev, vocab, lambda line: None)
                    log(f"held-out text ([paths] dev): OOV {100 * dev_oov:.1f}% with the start's vocabulary, "
                        f"{100 * grown_oov:.1f}% with the domain words added")
            elif not new_softmax:  # no pass counted the domain's words: the lines are read for the counts alone
                _report_corpus(corpus, output, info, log)
            if info.is_main:
                if before is not None:
                    before["softmax"] = "given" if not new_softmax else ("warmed up" if warmed else "untrained")
                if general_before is not None:
                    log(f"general held-out perplexity before fine-tuning: {_ppl_text(general_before)}")
                saved = {"domain": before, "general": general_before, "growth": None if growth is None else growth.to_dict()}
                write_atomic(output / BEFORE_NAME, json.dumps(saved).encode("utf-8"))
        saved_before = _saved_before(output) if info.is_main else None
        check_time_left(limit, time.monotonic() - started,
                        before="loading the model, reading the texts, scoring them and growing the vocabulary")
        remaining = _remaining(limit, started)
        extra = {"training_config": config.raw, "stage": "finetune", "start": str(model or options or "shipped"),
                 "finetune_recipe": {key: getattr(settings, key) for key in RECIPE_KEYS}}
        if language:
            extra["lang"] = language
        if bilm.vector_setting is not None:
            extra["vectors_carried_from"] = bilm.vector_setting.weights_sha256
        summary = train_lm(
            lm, vocab, training_text, settings=settings, corpus_settings=config.corpus, seed=config.seed,
            output=output, info=info, dev_segments=dev, resume=resume, max_time=remaining, extra=extra,
            stream=stream, steps_per_epoch=None, probe=config.probe,
        )
        interrupted = summary.stopped_by == "interrupted"
        # the scores after come when the run ends: an interrupted run's best so far may be an earlier run's
        after = None if interrupted else summary.best_dev
        result = FinetuneResult(before=before, after=after, summary=summary, new_softmax=new_softmax)
        if interrupted:
            # Ctrl-C: stop now; the scores after and the report come when a --resume run ends
            log(f"interrupted at step {summary.steps}: its checkpoint and model-last are written; run the same "
                "command with --resume to continue from there" + best_at_interrupt(summary, dev is not None))
            barrier(info)
            return result
        if info.is_main:
            _after_best(lm, output, vocab, dev, general, shared, saved_before, result, log)
            # tokens and seconds cover this invocation, from start_step to steps (a resumed run starts past 0)
            report = {"before": before, "after_best": after, "after_last": summary.last_dev, "steps": summary.steps,
                      "start_step": summary.start_step, "tokens": summary.tokens, "seconds": summary.seconds,
                      "new_softmax": new_softmax, "weights_sha256": _written_weights(output),
                      "recipe": extra["finetune_recipe"], "lang": language,
                      "replay": None if replay_path is None else {"text": Path(replay_path).name,
                                                                  "every": config.finetune.replay_every},
                      "tokenizer": {"train": corpus.tokenizer_note, "sentences": corpus.sentences},
                      "domain": {"before": before, "after": result.domain_after},
                      "general": result.general,
                      "vocabulary": (saved_before or {}).get("growth"),
                      "provenance": provenance(
                          model=model_record(model, options=options, weights=weights),
                          model_note="the model fine-tuning started from",
                          data=data_record(corpus.files + (resolve_paths(config.dev) if config.dev else [])
                                           + (resolve_paths(general_path) if general_path else [])
                                           + (resolve_paths(replay_path) if replay_path else [])),
                      )}
            write_atomic(output / REPORT_NAME, json.dumps(report, indent=2).encode("utf-8"))
            if before and after and "ppl" in after:
                log(f"held-out perplexity: {before['ppl']:.2f} before, {after['ppl']:.2f} after fine-tuning")
        barrier(info)
        return result
    finally:
        shutdown(info)


def _report_corpus(corpus: Corpus, output: Path, info: DistInfo, log, counted: Optional[CorpusStats] = None,
                   read_by: str = "") -> None:
    """What the training text held, with the lines skipped (empty, over-long, malformed) and those with
    bytes that are not UTF-8: DIR's corpus-stats.json and a line in the log (rank 0).

    counted (Optional[CorpusStats]): the counts of a pass that read the text already (``read_by``
        says which); None: a resumed run's saved counts are said again, else the text is read once
        now, lines only (not tokenized), and the log says what that pass took.
    """
    if not info.is_main:
        return
    path = output / STATS_NAME
    if counted is None and path.is_file():
        saved = json.loads(path.read_text(encoding="utf-8"))
        log(f"training corpus (as read when the run began, {STATS_NAME}): {CorpusStats.from_dict(saved['stats']).summary()}")
        return
    if counted is None:
        started = time.monotonic()
        counted = CorpusStats(tokenized=False)
        for _ in corpus.texts(counted):
            pass
        read_by = f"a pass reading its lines, not tokenized, which took {time.monotonic() - started:.1f}s"
    record = {"stats": counted.to_dict(), "read_by": read_by, "provenance": provenance(
        model=None, model_note="reading a corpus reads no model", data=data_record(corpus.files))}
    write_atomic(path, json.dumps(record, indent=2).encode("utf-8"))
    log(f"training corpus: {counted.summary()} ({read_by}; {STATS_NAME})")


def _check_held_out_texts(dev, general, vocab: Vocab, log) -> Optional[float]:
    """Refuse a held-out text wholly outside ``vocab``, warn of one largely outside it.

    RETURNS (Optional[float]): the domain's held-out OOV rate; None without one.
    """
    dev_oov = check_held_out(dev, vocab, log, what="held-out text ([paths] dev)")
    check_held_out(general, vocab, log, what="general held-out text")
    return dev_oov


def _softmax(bilm, vocab: Vocab, weights: Optional[Dict[str, torch.Tensor]], config: LMConfig) -> WordSoftmax:
    """A new softmax for ``vocab`` (``weights`` None), or the given one (sampled above ``SAMPLED_ABOVE`` words)."""
    if weights is None:
        return WordSoftmax(len(vocab), bilm.config.projection_dim, n_samples=config.softmax.n_samples)
    n_samples = config.softmax.n_samples or (PUBLISHED_SAMPLES if len(vocab) > SAMPLED_ABOVE else 0)
    return WordSoftmax.from_weights(weights["weight"], weights["bias"], n_samples=n_samples)


def _grown(bilm, vocab: Vocab, softmax_weights, corpus: Corpus, config: LMConfig, output: Path, info: DistInfo, log):
    """The start's vocabulary and softmax with the domain's words added (``[finetune] add_words``),
    the vocabulary written to DIR (a resumed run reads it back); the pass that counts the words also
    counts what the text held (``_report_corpus``) and the words passed over as unfit (``PassedOver``).

    RETURNS (Tuple[Vocab, dict, Growth]).
    """
    settings = config.finetune
    stats, passed_over = CorpusStats(), PassedOver()
    segments = split_long(corpus.segments(stats), config.corpus.max_sentence_tokens)
    words = domain_words(segments, vocab, limit=settings.add_words, min_count=settings.add_min_count,
                         passed_over=passed_over)
    _report_corpus(corpus, output, info, log, stats, "counted in the pass for [finetune] add_words")
    if passed_over.total:
        log(passed_over.summary(settings.add_min_count))
    vocab, softmax_weights, growth = grow_vocabulary(bilm, vocab, softmax_weights, words)
    growth.passed_over = passed_over.to_dict()
    log(f"vocabulary: {len(growth.words)} domain words added (seen {settings.add_min_count}+ times; "
        f"[finetune] add_words = {settings.add_words}), {growth.old_size} -> {len(vocab)}; their softmax rows "
        f"fitted from the token encoder (R^2 {growth.fit_r2:.2f} on the known words)"
        + (f"; the most frequent: {', '.join(map(shown, growth.words[:8]))}" if growth.words else ""))
    if info.is_main:
        vocab.to_disk(output)
    barrier(info)
    return vocab, softmax_weights, growth


def _resumed_vocabulary(vocab: Vocab, softmax_weights, output: Path):
    """The vocabulary a resumed run grew (DIR's vocab.txt: the start's and the domain words after
    it), with a softmax of its size for the checkpoint to fill; the start's where it grew none."""
    if not (output / VOCAB_NAME).is_file():
        return vocab, softmax_weights
    saved = Vocab.from_disk(output)
    if len(saved) <= len(vocab) or saved.tokens[: len(vocab)] != vocab.tokens:
        return vocab, softmax_weights
    extra = len(saved) - len(vocab)
    weight, bias = softmax_weights["weight"], softmax_weights["bias"]
    return saved, {"weight": torch.cat([weight, weight.new_zeros(extra, weight.shape[1])]),
                   "bias": torch.cat([bias, bias.new_zeros(extra)])}


def _after_best(lm: LanguageModel, output: Path, vocab: Vocab, dev, general, shared: Optional[int],
                before: Optional[Dict[str, Any]], result: FinetuneResult, log) -> None:
    """Score model-best as the start was scored (the domain's held-out text and the general one,
    over the shared vocabulary too), into ``result``; warn where general perplexity more than doubled."""
    best = output / "model-best"
    if dev is None and general is None or not (best / WEIGHTS_NAME).is_file():
        return
    from .model_dir import load_lm

    scored, _ = load_lm(best)
    scored = scored.to(lm.bilm.device)
    general_before = (before or {}).get("general")
    domain_before = (before or {}).get("domain")
    if dev is not None:
        result.domain_after = _score(scored, vocab, dev, None, shared=shared)
        if domain_before and "ppl_shared" in domain_before and "ppl_shared" in result.domain_after:
            log(f"held-out perplexity over the words both vocabularies share: {domain_before['ppl_shared']:.2f} before, "
                f"{result.domain_after['ppl_shared']:.2f} after fine-tuning (model-best)")
    if general is None:
        return
    general_after = _score(scored, vocab, general, None, shared=shared)
    key = "ppl_shared" if general_before and "ppl_shared" in general_before and "ppl_shared" in general_after else "ppl"
    ratio = general_after[key] / general_before[key] if general_before else None
    result.general = {"before": general_before, "after": general_after, "ratio": ratio, "ratio_of": key}
    log(f"general held-out perplexity after fine-tuning: {_ppl_text(general_after)}"
        + (f"; {ratio:.2f}x before ({key})" if ratio is not None else ""))
    if ratio is not None and ratio > FORGETTING_WARN:
        log(f"warning: general held-out perplexity more than doubled ({general_before[key]:.1f} -> {general_after[key]:.1f}, "
            f"{ratio:.1f}x): the model is forgetting general text; lower [finetune] learning_rate, train for less "
            "time, or keep [finetune]'s recipe if [training]'s was used")


def _ppl_text(record: Dict[str, Any]) -> str:
    shared = f", over the shared vocabulary {record['ppl_shared']:.2f}" if "ppl_shared" in record else ""
    return f"{record['ppl']:.2f} (OOV {100 * record['oov_rate']:.1f}%{shared})"


def _score(lm: LanguageModel, vocab: Vocab, read, info: Optional[DistInfo], *, shared: Optional[int]) -> Optional[Dict[str, Any]]:
    """The perplexity record of a held-out stream (rank 0 only; None without one)."""
    if read is None or (info is not None and not info.is_main):
        return None
    return evaluate_perplexity(lm, read(), vocab, shared=shared).to_dict()


def _warm_up(lm: LanguageModel, vocab: Vocab, corpus, config: LMConfig, settings: TrainingSettings, output: Path,
             info: DistInfo, max_time, stream) -> None:
    """Train only the new softmax for ``warmup_steps`` steps (no held-out checks, no dropout on a frozen biLM)."""
    for param in lm.bilm.parameters():
        param.requires_grad_(False)
    steps = config.finetune.warmup_steps
    settings = replace(
        settings, max_steps=steps, max_epochs=max(settings.max_epochs, 1), optimizer=config.training.optimizer,
        learning_rate=config.finetune.warmup_learning_rate, warmup_steps=0, lr_schedule="constant",
        eval_frequency=steps + 1, checkpoint_frequency=steps + 1,
    )
    try:
        train_lm(
            lm, vocab, corpus, settings=settings, corpus_settings=config.corpus, seed=config.seed,
            output=output / WARMUP_DIR, info=info, max_time=max_time, extra={"stage": "finetune-warmup"}, stream=stream,
        )
    finally:
        for param in lm.bilm.parameters():
            param.requires_grad_(True)


def _report_dev(lm: LanguageModel, vocab: Vocab, dev, info: DistInfo, log, when: str,
                shared: Optional[int] = None) -> Optional[Dict[str, Any]]:
    if dev is None or not info.is_main:
        return None
    result = evaluate_perplexity(lm, dev(), vocab, shared=shared).to_dict()
    log(f"held-out perplexity {when}: {result['ppl']:.2f} (forward {result['forward_ppl']:.2f}, "
        f"backward {result['backward_ppl']:.2f})")
    return result


def _saved_before(output: Path) -> Optional[Dict[str, Any]]:
    """What the run measured before training: {"domain": ..., "general": ..., "growth": ...} (a run
    of an earlier version saved the domain's record alone)."""
    path = output / BEFORE_NAME
    if not path.is_file():
        return None
    saved = json.loads(path.read_text(encoding="utf-8"))
    return saved if "domain" in saved else {"domain": saved, "general": None, "growth": None}


def _remaining(limit: Optional[float], started: float) -> float:
    if not limit:
        return 0.0
    # 0 means "no limit" to the loop, so a spent budget becomes the smallest positive one
    return max(limit - (time.monotonic() - started), 1e-6)
