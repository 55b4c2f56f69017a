"""Streaming corpus readers: plain text, JSONL and .spacy DocBin, from files, directories and globs.

Nothing here holds more than one line (bounded by ``max_line_chars``) or one
DocBin file in memory, so memory does not grow with the corpus. Files are opened and lines decoded
as every command reads text (``io.text_input``: plain, .gz, .bz2, .xz, .zst, .lz4; binary files refused; bytes
that are not UTF-8 replaced with U+FFFD and the lines counted, or refused with ``strict_utf8``).
Lines that are empty, too long or malformed JSON are skipped and counted in a ``CorpusStats``,
never fatal (a byte order mark opening a file is dropped); a corpus with no usable line at all is
refused (``check_usable``, ``UnusableCorpus``).

Tokenizing: ``tokenizer = "auto"`` reads the first lines and keeps whitespace for text that is
already tokenized (punctuation stands apart), else splits it with the language's spaCy tokenizer
(``choose_tokenizer``; the choice and its reason are in ``Corpus.tokenizer_note``). With
``sentences`` set to ``"sentencizer"`` (spaCy's rule-based splitter) or a trained spaCy pipeline's
name (its ``senter`` or parser), a line is no longer a sentence: the lines of a paragraph (up to a
blank line) are joined, so wrapped text reads as prose, and cut into sentences.
"""
import io
import json
import re
from collections import Counter
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, Union

from ..io.text_input import CODECS, decode_line, open_text, text_files

PathLike = Union[str, Path]
Tokenizer = Callable[[str], List[str]]
FORMATS = ("auto", "txt", "jsonl", "spacy")
_END = object()
# a byte order mark: at a file's start it marks the encoding, and is not read as text
BOM = "\ufeff"
_SUFFIX_FORMATS = {".txt": "txt", ".text": "txt", ".tokens": "txt", ".jsonl": "jsonl", ".spacy": "spacy"}


@dataclass
class CorpusStats:
    """Counts of what a pass over a corpus read and skipped.

    lines (int): lines (or DocBin docs) seen.
    segments (int): lines/docs kept (each becomes one or more sentences).
    tokens (int): tokens of the kept segments.
    skipped (Counter): skipped lines by reason: "empty", "too_long", "bad_json", "no_text".
    undecodable (int): lines kept with bytes that are not UTF-8 replaced by U+FFFD.
    first_undecodable (Optional[str]): the first such line, ``FILE:LINE``.
    tokenized (bool): whether the pass cut the lines into segments (False: read only, ``Corpus.texts``:
        segments and tokens not counted).
    """

    lines: int = 0
    segments: int = 0
    tokens: int = 0
    skipped: Counter = field(default_factory=Counter)
    undecodable: int = 0
    first_undecodable: Optional[str] = None
    tokenized: bool = True

    def skip(self, reason: str) -> None:
        self.skipped[reason] += 1

    @property
    def n_skipped(self) -> int:
        return sum(self.skipped.values())

    def to_dict(self) -> Dict[str, object]:
        """segments and tokens are None where the pass did not count them (``tokenized`` False)."""
        counted = self.tokenized
        return {"lines": self.lines, "segments": self.segments if counted else None, "tokens": self.tokens if counted else None,
                "skipped": dict(self.skipped), "undecodable": self.undecodable, "first_undecodable": self.first_undecodable}

    @classmethod
    def from_dict(cls, saved: Dict[str, object]) -> "CorpusStats":
        """The counts ``to_dict`` saved (a record without ``first_undecodable`` gives None)."""
        tokenized = saved.get("segments") is not None
        return cls(lines=saved["lines"], segments=saved["segments"] or 0, tokens=saved["tokens"] or 0,
                   skipped=Counter(saved.get("skipped") or {}), undecodable=saved.get("undecodable", 0),
                   first_undecodable=saved.get("first_undecodable"), tokenized=tokenized)

    def summary(self) -> str:
        reasons = ", ".join(f"{n} {reason}" for reason, n in sorted(self.skipped.items()))
        skipped = f"; skipped {self.n_skipped} lines ({reasons})" if self.skipped else ""
        replaced = (f"; {self.undecodable} lines with bytes that are not UTF-8, replaced by U+FFFD (the first: "
                    f"{self.first_undecodable}; --strict-utf8 refuses them)") if self.undecodable else ""
        read = f"{self.segments} segments, {self.tokens} tokens from " if self.tokenized else ""
        return f"{read}{self.lines} lines{skipped}{replaced}"


def resolve_paths(spec: Union[PathLike, Sequence[PathLike]]) -> List[Path]:
    """Files named by a path, a directory (recursively), a glob, or a comma-separated / list of these
    (``io.text_input.text_files``: every file of a folder, read by its suffix's format or as text).

    RETURNS (List[Path]): the files, de-duplicated. Raises FileNotFoundError naming what matched nothing.
    """
    return [path for path, _ in text_files(spec, suffixes=None)]


def file_format(path: Path, fmt: str = "auto") -> str:
    """The reader for a file: ``fmt`` unless "auto", else from the suffix (before any .gz); txt by default."""
    if fmt not in FORMATS:
        raise ValueError(f"corpus format must be one of {FORMATS}, not {fmt!r}")
    if fmt != "auto":
        return fmt
    suffixes = [s for s in path.suffixes if s not in CODECS]
    return _SUFFIX_FORMATS.get(suffixes[-1] if suffixes else "", "txt")


def bounded_lines(handle: io.BufferedIOBase, max_bytes: int) -> Iterator[Optional[bytes]]:
    """Lines of a binary file; a line longer than ``max_bytes`` yields None and is never held whole."""
    while True:
        line = handle.readline(max_bytes + 1)
        if not line:
            return
        if len(line) > max_bytes and not line.endswith(b"\n"):
            # drain the rest of the over-long line in bounded chunks
            while True:
                rest = handle.readline(max_bytes + 1)
                if not rest or rest.endswith(b"\n"):
                    break
            yield None
            continue
        yield line


@dataclass(frozen=True)
class ReadRange:
    """The part of one file a rank reads: the lines whose first byte is in [start, end).

    path (Path): the file. start (int): a byte offset. end (Optional[int]): None: to the end.
    """

    path: Path
    start: int = 0
    end: Optional[int] = None


def splittable(path: Path, fmt: str) -> bool:
    """Whether a file can be read from a byte offset: uncompressed text or JSONL, not a DocBin."""
    return file_format(path, fmt) in ("txt", "jsonl") and path.suffix not in CODECS


def plan_reads(files: Sequence[Path], fmt: str, shard: int, n_shards: int) -> Optional[List[ReadRange]]:
    """What rank ``shard`` of ``n_shards`` reads of ``files`` (in this order), so that the ranks read
    disjoint parts and each about 1/n of the bytes.

    Uncompressed text and JSONL: the files' bytes taken end to end and cut into ``n_shards``
    contiguous ranges (a line belongs to the range holding its first byte). With a file that cannot
    be read from an offset (``.gz``, DocBin) and at least as many files as ranks: whole files, each
    to the rank that has the fewest bytes so far.
    RETURNS (Optional[List[ReadRange]]): this rank's ranges; None where neither applies (fewer
        compressed files than ranks): then every rank reads every line and keeps every n-th.
    """
    sizes = [path.stat().st_size for path in files]
    if all(splittable(path, fmt) for path in files):
        total = sum(sizes)
        low, high = total * shard // n_shards, total * (shard + 1) // n_shards
        ranges, offset = [], 0
        for path, size in zip(files, sizes):
            start, end = max(low - offset, 0), min(high - offset, size)
            if start < end:
                ranges.append(ReadRange(path, start, None if end >= size else end))
            offset += size
        return ranges
    if len(files) < n_shards:
        return None
    loads, mine = [0] * n_shards, []
    for path, size in zip(files, sizes):
        rank = min(range(n_shards), key=lambda k: (loads[k], k))
        loads[rank] += size
        if rank == shard:
            mine.append(ReadRange(path))
    return mine


def _skip_partial_line(handle: io.BufferedIOBase, start: int) -> None:
    """Move to ``start``, then past the line under way there (the previous range's), if any."""
    handle.seek(start - 1)
    if handle.read(1) == b"\n":
        return
    while True:
        rest = handle.readline(1 << 16)
        if not rest or rest.endswith(b"\n"):
            return


def iter_texts(
    path: Path, fmt: str, stats: CorpusStats, *, max_line_chars: int, start: int = 0, end: Optional[int] = None, _blank: bool = False,
    reads: Optional[List[Tuple[Path, int, int]]] = None, strict_utf8: bool = False, paragraphs: bool = False,
) -> Iterator[str]:
    """The text of each good line (txt), record (jsonl) or doc (spacy) of one file, or of the lines
    starting in [start, end) (``ReadRange``).

    reads (Optional[List]): where given, gets (path, first byte read, byte after the last read).
    strict_utf8 (bool): refuse a line that is not UTF-8 (``TextDecodeError``) instead of replacing its bytes.
    paragraphs (bool): plain text only: join the lines up to a blank line (wrapped text) into one
        text, of at most ``max_line_chars`` characters (a longer paragraph goes out in pieces, each
        ending at a line's end); blank lines then separate, and are not counted as skipped.
    """
    if fmt == "spacy":
        yield from _iter_docbin_texts(path, stats)
        return
    if paragraphs and fmt == "txt":
        yield from _paragraphs(iter_texts(
            path, fmt, stats, max_line_chars=max_line_chars, start=start, end=end, reads=reads,
            strict_utf8=strict_utf8, paragraphs=False, _blank=True,
        ), max_line_chars)
        return
    with open_text(path) as handle:
        if start:
            _skip_partial_line(handle, start)
        lines = bounded_lines(handle, 4 * max_line_chars)
        number = 0
        while True:
            # the generator reads a line only when asked: here the handle stands at the next one
            if end is not None and handle.tell() >= end:
                break
            raw = next(lines, _END)
            if raw is _END:
                break
            stats.lines += 1
            number += 1
            if raw is None:
                stats.skip("too_long")
                continue
            # a byte range's line numbers count from its start: the place names the range's own line
            place = f"{path.name}:{number}" if not start else f"{path.name}, line {number} after byte {start}"
            line, replaced = decode_line(raw.rstrip(b"\n").rstrip(b"\r"), place=place, strict=strict_utf8)
            if number == 1 and not start and line.startswith(BOM):
                line = line[1:]  # the file's byte order mark, not its text
            if replaced:
                stats.undecodable += 1
                stats.first_undecodable = stats.first_undecodable or place
            if len(line) > max_line_chars:
                stats.skip("too_long")
                continue
            if fmt == "jsonl":
                text = _jsonl_text(line, stats)
                if text is None:
                    continue
            else:
                text = line
            if not text.strip():
                if _blank:
                    yield ""  # a paragraph's end (``_paragraphs``)
                else:
                    stats.skip("empty")
                continue
            yield text.strip()
        if reads is not None:
            reads.append((path, max(start - 1, 0), handle.tell()))


def _paragraphs(lines: Iterable[str], max_chars: int) -> Iterator[str]:
    """Lines joined with spaces up to each blank line ("" in ``lines``), in pieces of at most ``max_chars``."""
    held: List[str] = []
    size = 0
    for line in lines:
        if line and held and size + 1 + len(line) > max_chars:
            yield " ".join(held)
            held, size = [], 0
        if line:
            held.append(line)
            size += len(line) + (1 if size else 0)
        elif held:
            yield " ".join(held)
            held, size = [], 0
    if held:
        yield " ".join(held)


def _jsonl_text(line: str, stats: CorpusStats) -> Optional[str]:
    if not line.strip():
        stats.skip("empty")
        return None
    try:
        record = json.loads(line)
    except json.JSONDecodeError:
        stats.skip("bad_json")
        return None
    text = record.get("text") if isinstance(record, dict) else None
    if not isinstance(text, str):
        stats.skip("no_text")
        return None
    return text


def _iter_docbin_texts(path: Path, stats: CorpusStats) -> Iterator[str]:
    # a DocBin is one serialized blob: bounded by the file, not by the corpus
    from spacy.tokens import DocBin
    from spacy.vocab import Vocab

    with CODECS.get(path.suffix, open)(path, "rb") as handle:  # binary by nature: no NUL check
        data = handle.read()
    for doc in DocBin().from_bytes(data).get_docs(Vocab()):
        stats.lines += 1
        words = [t.text for t in doc if not t.is_space]
        if not words:
            stats.skip("empty")
            continue
        # pre-tokenized: joined with single spaces and split again by the whitespace tokenizer
        yield " ".join(words)


def whitespace_tokenizer(text: str) -> List[str]:
    return text.split()


def make_tokenizer(name: str) -> Tokenizer:
    """"whitespace" splits on spaces; any other name is a spaCy language code (e.g. "en") whose tokenizer is used."""
    if name == "whitespace":
        return whitespace_tokenizer
    import spacy

    nlp = spacy.blank(name)

    def tokenize(text: str) -> List[str]:
        return [t.text for t in nlp.tokenizer(text) if not t.is_space]

    return tokenize


# [corpus] tokenizer: "auto" decides between these two by reading the text (``choose_tokenizer``)
AUTO, WHITESPACE = "auto", "whitespace"
# [corpus] sentences: "lines" (a line is a sentence), spaCy's rule-based "sentencizer", a trained
# pipeline's name (its senter or parser, e.g. "en_core_web_sm"), or "auto" (``wrapped_share``: the
# sentencizer for raw text wrapped across lines, else lines)
LINES, SENTENCIZER = "lines", "sentencizer"
# the share of a raw text's lines that run on into the next above which "auto" reads it as wrapped
WRAPPED_SHARE = 0.2
_LINE_END = re.compile(r"[.!?:;\"\u201d')\]]$")
# lines read to decide whether text is tokenized already
AUTO_SAMPLE_LINES = 500
# a word with punctuation attached: an opening bracket or quote before it, a comma, colon,
# semicolon, question or exclamation mark, closing bracket or quote after it
_ATTACHED = re.compile(r"^[(\[{\"\u201c\u2018]+\w|\w[,;:!?)\]}\"\u201d\u2019]+$")
# a line's last word with its full stop attached ("year.", not "U.S" nor "3.5")
_FINAL_STOP = re.compile(r"[^\W\d]{2,}[.!?]$")
# the share of words with punctuation attached above which text reads as raw, not tokenized
# (tokenized English has about none, since its punctuation stands apart; raw English about 5%)
RAW_SHARE = 0.01


def attached_share(lines: Iterable[str]) -> Tuple[float, int]:
    """The share of the whitespace-separated words of ``lines`` that carry punctuation a tokenizer
    would split off (``_ATTACHED``; a line's last word ending in a full stop), and the word count.

    RETURNS (Tuple[float, int]): (share, words).
    """
    words = attached = 0
    for line in lines:
        parts = line.split()
        words += len(parts)
        attached += sum(1 for word in parts if _ATTACHED.search(word))
        if parts and _FINAL_STOP.search(parts[-1]):
            attached += 1
    return attached / max(words, 1), words


def choose_tokenizer(tokenizer: str, lang: Optional[str], sample: Sequence[str]) -> Tuple[str, str]:
    """The tokenizer a corpus is read with, and a line saying which and why.

    tokenizer (str): "auto", "whitespace" or a spaCy language code.
    lang (Optional[str]): the text's language for "auto" (None: spaCy's multi-language "xx").
    sample (Sequence[str]): the text's first lines (``AUTO_SAMPLE_LINES``), read by "auto" only.
    RETURNS (Tuple[str, str]): "whitespace" or a spaCy language code, and the note for the log.
    """
    if tokenizer != AUTO:
        what = "whitespace (pre-tokenized text)" if tokenizer == WHITESPACE else f"spaCy's '{tokenizer}' tokenizer"
        return tokenizer, f"tokenizer: {what}, as [corpus] tokenizer / --tokenizer says"
    share, words = attached_share(sample)
    if words == 0:
        return WHITESPACE, "tokenizer: whitespace (no text to read)"
    measured = f"{100 * share:.1f}% of the first {words} words have punctuation attached"
    if share <= RAW_SHARE:
        return WHITESPACE, f"tokenizer: whitespace: the text reads as pre-tokenized ({measured})"
    code = lang or "xx"
    which = f"spaCy's '{code}' tokenizer" + ("" if lang else " (multi-language: no language given; set [corpus] lang)")
    return code, f"tokenizer: {which}: the text reads as raw, not tokenized ({measured})"


def wrapped_share(lines: Sequence[str]) -> float:
    """The share of ``lines`` (consecutive, blank lines left out) whose sentence runs on into the
    next line: the line ends without closing punctuation and the next begins in lower case, as in
    text wrapped at a fixed width (newswire, e-mail, plain-text books)."""
    pairs = list(zip(lines, lines[1:]))
    running = sum(1 for line, after in pairs if not _LINE_END.search(line) and after[:1].islower())
    return running / max(len(pairs), 1)


Splitter = Callable[[str], List[List[str]]]


def make_splitter(tokenizer: str, sentences: str = LINES, lang: Optional[str] = None) -> Splitter:
    """A function from one text (a line, or a paragraph) to its segments' tokens.

    tokenizer (str): "whitespace" or a spaCy language code (not "auto": ``choose_tokenizer`` first).
    sentences (str): "lines" (the text is one segment), "sentencizer" or a trained pipeline's name.
    lang (Optional[str]): the blank pipeline's language where the tokens are whitespace-split.
    """
    tokenize = make_tokenizer(tokenizer)
    if sentences == LINES:
        def one(text: str) -> List[List[str]]:
            return [tokenize(text)]

        return one
    import spacy
    from spacy.tokens import Doc

    if sentences == SENTENCIZER:
        nlp = spacy.blank(tokenizer if tokenizer != WHITESPACE else (lang or "xx"))
        nlp.add_pipe("sentencizer")
    else:
        try:
            nlp = spacy.load(sentences)
        except OSError as err:
            raise ValueError(f"[corpus] sentences = {sentences!r}: not 'lines', 'sentencizer' nor an installed "
                             f"spaCy pipeline ({err})") from err
        keep = [name for name in ("senter", "parser") if name in nlp.pipe_names][:1]
        if not keep:
            raise ValueError(f"[corpus] sentences = {sentences!r}: the pipeline has no senter or parser to split sentences")
        nlp.select_pipes(enable=keep)
        if keep == ["senter"] and "senter" in nlp.disabled:
            nlp.enable_pipe("senter")

    def split(text: str) -> List[List[str]]:
        if tokenizer == WHITESPACE:
            doc = Doc(nlp.vocab, words=text.split())
            for _, component in nlp.pipeline:
                doc = component(doc)
        else:
            doc = nlp(text)
        return [[t.text for t in sent if not t.is_space] for sent in doc.sents]

    return split


class UnusableCorpus(ValueError):
    """A corpus with no line to learn from or score: empty, every line over the length limit,
    unreadable (no UTF-8), or a format whose records hold no text (``check_usable``)."""


def unusable_reason(corpus: "Corpus", stats: CorpusStats) -> str:
    """Why a full pass that kept nothing kept nothing, from its counts, with what to do."""
    where = ", ".join(str(path) for path in corpus.files[:3]) + (", ..." if len(corpus.files) > 3 else "")
    skipped = stats.skipped
    if stats.lines == 0:
        return f"{where}: the corpus is empty (no line in {len(corpus.files)} file(s))"
    if skipped["too_long"] and skipped["too_long"] + skipped["empty"] == stats.lines:
        return (f"{where}: every line is over [corpus] max_line_chars ({corpus.max_line_chars} characters): "
                f"{stats.summary()}; split the text into lines (one sentence or paragraph a line) or raise the limit")
    if stats.lines and skipped["empty"] == stats.lines:
        return f"{where}: every line is empty ({stats.summary()})"
    return f"{where}: no line holds text to read ({stats.summary()})"


def check_usable(corpus: "Corpus", *, what: str = "training corpus") -> CorpusStats:
    """Refuse a corpus that gives no segment, or whose every line was unreadable (bytes that are
    not UTF-8, replaced): reading stops at the first segment from a readable line, so a usable
    corpus costs a few lines. RETURNS (CorpusStats): what was read. Raises ``UnusableCorpus``."""
    stats = CorpusStats()
    for _ in corpus.segments(stats):
        if stats.undecodable < stats.segments:
            return stats
    if stats.segments == 0:
        raise UnusableCorpus(f"no usable {what}: {unusable_reason(corpus, stats)}")
    raise UnusableCorpus(
        f"no usable {what}: {', '.join(str(p) for p in corpus.files[:3])}: unreadable: every line held bytes that are "
        f"not UTF-8 (the first: {stats.first_undecodable}); convert the text to UTF-8 (e.g. iconv -f latin1 -t utf-8)"
    )


class Corpus:
    """A re-iterable stream of tokenized segments (sentences or paragraphs) from one or more files.

    paths (str | Path | Sequence): files, directories, globs (comma-separated or a list).
    fmt (str): "auto" (by suffix), "txt", "jsonl" or "spacy".
    tokenizer (str): "whitespace", a spaCy language code, or "auto" (``choose_tokenizer``: whitespace
        for pre-tokenized text, else ``lang``'s spaCy tokenizer); the one chosen is ``tokenizer_name``
        and ``tokenizer_note`` says why.
    lang (Optional[str]): the text's language, for "auto" and sentence splitting.
    sentences (str): "lines" (each line a segment), "sentencizer" or a trained spaCy pipeline's name:
        the lines of each paragraph joined, then cut into sentences (``make_splitter``); "auto": the
        sentencizer for raw text wrapped across lines (``wrapped_share``), else lines.
    max_line_chars (int): longer lines are skipped as "too_long".
    strict_utf8 (bool): refuse a line that is not UTF-8, naming its file and line (default: its bad
        bytes replaced by U+FFFD, the line counted in ``stats.undecodable``).
    """

    def __init__(
        self,
        paths: Union[PathLike, Sequence[PathLike]],
        *,
        fmt: str = "auto",
        tokenizer: str = "whitespace",
        lang: Optional[str] = None,
        sentences: str = LINES,
        max_line_chars: int = 20000,
        strict_utf8: bool = False,
    ) -> None:
        self.files = resolve_paths(paths)
        self.fmt = fmt
        self.max_line_chars = max_line_chars
        self.strict_utf8 = strict_utf8
        self.lang = lang
        self.stats = CorpusStats()
        # set to a list to record each range read: (path, first byte, byte after the last)
        self.reads: Optional[List[Tuple[Path, int, int]]] = None
        self.sentences = LINES  # the sample is read line by line
        sampled = AUTO in (tokenizer, sentences)
        sample = list(islice(self.texts(CorpusStats()), AUTO_SAMPLE_LINES)) if sampled else []
        self.tokenizer_name, self.tokenizer_note = choose_tokenizer(tokenizer, lang, sample)
        if sentences == AUTO:
            wrapped = self.tokenizer_name != WHITESPACE and wrapped_share(sample) > WRAPPED_SHARE
            if wrapped:
                sentences = SENTENCIZER
                self.tokenizer_note += (f"; wrapped lines ({100 * wrapped_share(sample):.0f}% run on into the next): "
                                        "paragraphs joined")
            else:
                sentences = LINES
                # say so: the log names how the text was cut into sentences, not only how it was tokenized
                self.tokenizer_note += ("; each line a sentence (pre-tokenized)" if self.tokenizer_name == WHITESPACE
                                        else "; each line a sentence (its lines do not run on into the next)")
        if sentences != LINES and tokenizer == AUTO and self.tokenizer_name == WHITESPACE:
            # text tokenized already is one sentence a line: its lines are not joined and split again
            self.tokenizer_note += f"; its lines kept as sentences (pre-tokenized: [corpus] sentences = {sentences!r} not applied)"
        elif sentences != LINES:
            self.sentences = sentences
            self.tokenizer_note += f"; sentences split by {sentences!r} within paragraphs (blank-line separated)"
        self._splitter: Optional[Splitter] = None

    @property
    def split(self) -> Splitter:
        """Text -> its segments' tokens (built on first use: a spaCy pipeline loads then)."""
        if self._splitter is None:
            self._splitter = make_splitter(self.tokenizer_name, self.sentences, self.lang)
        return self._splitter

    def tokenize(self, text: str) -> List[str]:
        """The tokens of one text, its sentences run together."""
        return [token for segment in self.split(text) for token in segment]

    def texts(self, stats: Optional[CorpusStats] = None, *, files: Optional[Sequence[Path]] = None) -> Iterator[str]:
        """Good raw lines of ``files`` (default: all, in order); paragraphs where sentences are split."""
        stats = self.stats if stats is None else stats
        for path in self.files if files is None else files:
            yield from iter_texts(path, file_format(path, self.fmt), stats, max_line_chars=self.max_line_chars, reads=self.reads,
                                  strict_utf8=self.strict_utf8, paragraphs=self.sentences != LINES)

    def segments(
        self,
        stats: Optional[CorpusStats] = None,
        *,
        files: Optional[Sequence[Path]] = None,
        shard: int = 0,
        n_shards: int = 1,
    ) -> Iterator[List[str]]:
        """Token lists of ``files`` (default: all, in order); with ``n_shards`` > 1 only rank
        ``shard``'s part, which it alone reads (``plan_reads``: byte ranges, or whole files), so
        read traffic does not grow with the ranks. Where no such plan exists (fewer compressed files
        than ranks) every rank reads all and keeps every n-th good line, starting at ``shard``.

        Lines are sharded before tokenizing, so each process tokenizes only its own part.
        """
        stats = self.stats if stats is None else stats
        files = self.files if files is None else files
        plan = plan_reads(files, self.fmt, shard, n_shards) if n_shards > 1 else None
        if plan is None:
            texts = (t for index, t in enumerate(self.texts(stats, files=files)) if index % n_shards == shard)
        else:
            texts = (
                text for part in plan for text in iter_texts(
                    part.path, file_format(part.path, self.fmt), stats, max_line_chars=self.max_line_chars,
                    start=part.start, end=part.end, reads=self.reads, strict_utf8=self.strict_utf8,
                    paragraphs=self.sentences != LINES,
                )
            )
        split = self.split
        for text in texts:
            pieces = [tokens for tokens in split(text) if tokens]
            if not pieces:
                stats.skip("empty")
                continue
            for tokens in pieces:
                stats.segments += 1
                stats.tokens += len(tokens)
                yield tokens


def split_long(segments: Iterable[List[str]], max_tokens: int) -> Iterator[List[str]]:
    """Cut segments longer than ``max_tokens`` into consecutive pieces (paragraph-per-line corpora)."""
    for tokens in segments:
        for start in range(0, len(tokens), max_tokens):
            yield tokens[start : start + max_tokens]


class ReplayCorpus:
    """A domain corpus with general text replayed among it: after every ``every`` domain segments,
    one segment of ``replay`` (cycled, from its start at each epoch), so fine-tuning keeps seeing
    text like the one the model was trained on. Read as ``Corpus`` is by training
    (``batches.epoch_segments``): ``files`` are the domain's (their order is the epoch's), each
    rank replays its own share of ``replay``.

    domain (Corpus): the text to adapt to. replay (Corpus): general text. every (int): domain
        segments per replayed one (3: a quarter of the segments are replayed).
    """

    def __init__(self, domain: Corpus, replay: Corpus, every: int) -> None:
        if every < 1:
            raise ValueError(f"a replayed segment comes after at least 1 domain segment, not {every}")
        self.domain, self.replay, self.every = domain, replay, every
        self.files = domain.files
        self.stats = domain.stats
        self.tokenizer_note, self.sentences = domain.tokenizer_note, domain.sentences
        self.max_line_chars = domain.max_line_chars

    def segments(
        self, stats: Optional[CorpusStats] = None, *, files: Optional[Sequence[Path]] = None, shard: int = 0,
        n_shards: int = 1,
    ) -> Iterator[List[str]]:
        """The domain's segments (as ``Corpus.segments``), one of ``replay``'s after every ``every``."""
        replayed = self._cycle(shard, n_shards)
        for index, tokens in enumerate(self.domain.segments(stats, files=files, shard=shard, n_shards=n_shards), start=1):
            yield tokens
            if index % self.every == 0:
                yield next(replayed)

    def _cycle(self, shard: int, n_shards: int) -> Iterator[List[str]]:
        while True:
            found = False
            for tokens in self.replay.segments(CorpusStats(), shard=shard, n_shards=n_shards):
                found = True
                yield tokens
            if not found:
                raise UnusableCorpus(f"no usable replay text: {unusable_reason(self.replay, CorpusStats())}")
