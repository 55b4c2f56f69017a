"""A held-out evaluation as the ``evaluate`` command runs it: text read through the one reader
(``Corpus``, on ``io.text_input``), scored by ``load_lm(...).perplexity``, and the record of the
run (the numbers, the model, the data, the head's files, the machine).

Nothing to score is an error, never a perplexity of 1, nor a number from text that was not read as
text: an empty file, only empty lines, only lines too long to read (``Corpus.max_line_chars``), or
only lines holding bytes that are not UTF-8 (another encoding: its perplexity would be that of U+FFFD),
nor from text whose every token is outside the vocabulary (``<UNK>``'s perplexity alone); at 10%
OOV or more (``perplexity.OOV_WARN``) the record carries a warning. Raw text is tokenized by the
model's language's spaCy tokenizer (``tokenizer = "auto"``: ``corpus.choose_tokenizer``), which the
record names.
"""
import resource
from dataclasses import dataclass
from itertools import chain, islice
from typing import Any, Dict, Optional

from ..files import file_sha256
from ..io.loading import PathLike, locate_bilm
from ..records.provenance import data_record, model_name, model_record, portable_path, provenance
from .corpus import Corpus, CorpusStats, split_long
from .model_dir import trained_segment_length
from .perplexity import Perplexity, oov_rate_checked, oov_warning
from .scoring import load_lm

# a published model records no segment length: its lines are scored whole
UNCUT = 10**9


@dataclass
class Evaluation:
    """What ``evaluate_corpus`` measured.

    perplexity (Perplexity): the sums; stats (CorpusStats): what was read.
    record (Dict[str, Any]): the numbers with the settings, the model, the data and the machine (JSON).
    """

    perplexity: Perplexity
    stats: CorpusStats
    record: Dict[str, Any]

    def summary(self) -> str:
        """RETURNS (str): one line: the three perplexities to 4 significant places, tokens, state, OOV,
        memory, the tokenizer."""
        r = self.record
        return (f"perplexity {r['ppl']:.4g} (forward {r['forward_ppl']:.4g}, backward {r['backward_ppl']:.4g}) "
                f"over {r['tokens']} tokens, {r['state']} state; OOV {100 * r['oov_rate']:.2f}% of a "
                f"{r['vocab_size']}-word vocabulary; peak RSS {r['peak_rss_mb']:.0f} MB; {self.stats.summary()}; "
                f"{r['tokenizer_note']}")

    @property
    def warnings(self) -> list:
        """RETURNS (list): what the number needs said beside it (a high OOV rate)."""
        return list(self.record.get("warnings", []))


def evaluate_corpus(
    input: str,
    *,
    model: Optional[PathLike] = None,
    options: Optional[PathLike] = None,
    weights: Optional[PathLike] = None,
    tokenizer: str = "auto",
    input_format: str = "auto",
    max_sentence_tokens: Optional[int] = None,
    max_segments: int = 0,
    batch_size: int = 64,
    carry_state: bool = False,
    chunk_size: Optional[int] = None,
    strict_utf8: bool = False,
    lang: Optional[str] = None,
    sentences: str = "auto",
) -> Evaluation:
    """Exact held-out perplexity of a model with its own softmax on text files.

    input (str): files, folders, globs (comma-separated).
    sentences (str): how lines become sentences, as ``[corpus] sentences`` in training: "auto" (raw
        text wrapped across lines joined and split by spaCy's sentencizer, else each line a
        sentence), "lines", "sentencizer" or a trained pipeline's name.
    model, options, weights: the model, as ``load_lm`` takes it.
    tokenizer (str): "auto" (whitespace for pre-tokenized text, else the spaCy tokenizer of the
        model's language, or of ``lang``), "whitespace" or a spaCy language code.
    input_format (str): "auto", "txt", "jsonl" or "spacy".
    max_sentence_tokens (Optional[int]): cut longer lines; None: as the model was trained (a
        published model's lines are not cut).
    max_segments (int): score only the first N segments (0: all).
    RETURNS (Evaluation): the perplexity, what was read, and the record. Raises ValueError when
        there is nothing to score.
    """
    from .corpus import resolve_paths

    resolve_paths(input)  # a missing file first
    source = locate_bilm(model, options=options, weights=weights)
    trained = source.training_record()
    language = lang or source.language or (trained or {}).get("lang")
    corpus = Corpus(input, fmt=input_format, tokenizer=tokenizer, lang=language, sentences=sentences,
                    strict_utf8=strict_utf8)
    lm = load_lm(model, options=options, weights=weights, chunk_size=chunk_size)
    if max_sentence_tokens is None:
        max_sentence_tokens = UNCUT if trained is None else trained_segment_length(trained)
    stats = CorpusStats()
    segments = islice(split_long(corpus.segments(stats), max_sentence_tokens), max_segments or None)
    first = next(segments, None)
    if first is None:
        hint = (f"; lines over {corpus.max_line_chars} characters are skipped: split them, one sentence a line"
                if stats.skipped["too_long"] else "")
        raise ValueError(f"{input}: no tokens to score ({stats.summary()}){hint}")
    perplexity = lm.perplexity(chain([first], segments), carry_state=carry_state, batch_size=batch_size)
    if stats.undecodable == stats.lines:
        raise ValueError(f"{input}: every line held bytes that are not UTF-8 (the first: {stats.first_undecodable}), "
                         "so no word was read; convert the text to UTF-8 (e.g. iconv -f latin1 -t utf-8)")
    rate = oov_rate_checked(perplexity.n_oov, perplexity.n_words, what=input)
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: kilobytes
    record = perplexity.to_dict()
    record.update({
        "model": model_name(model, options, weights),
        "data": ",".join(portable_path(p.strip()) for p in input.split(",") if p.strip()),
        "tokenizer": corpus.tokenizer_name,
        "tokenizer_note": corpus.tokenizer_note,
        "state": "carried" if carry_state else "fresh",
        "max_sentence_tokens": None if max_sentence_tokens == UNCUT else max_sentence_tokens,
        "vocab_size": len(lm.vocab), "softmax_chunk_size": lm.lm.softmax.chunk_size, "peak_rss_mb": round(peak_mb, 1),
        "head": {portable_path(f): file_sha256(f) for f in lm.head.files},
        "corpus": stats.to_dict(),
        "provenance": provenance(model=model_record(model, options=options, weights=weights), data=data_record(corpus.files)),
    })
    warning = oov_warning(rate, what=record["data"])  # the text as the record names it: no machine path
    if warning:
        record["warnings"] = [warning]
    return Evaluation(perplexity, stats, record)
