"""Word usages: every use of target words in a corpus, as a per-target matrix of ELMo vectors.

This is the input of lexical semantic change detection (``change.py``) as Kutuzov & Giulianelli
build it (github.com/akutuzov/semeval2020, ``code/elmo/extract_elmo.py``: every occurrence of a
target in a line, the line as its context, one vector per occurrence). A corpus is a text file,
one document (a sentence or a paragraph) a line, or a folder of such files (read in sorted
order). Each line is tokenized by a spaCy pipeline; a target matches a token's lemma where the
pipeline has a lemmatizer, else its word form, both lower-cased (``UsageSet.match`` says which).
At most ``max_uses`` uses per target are kept, a seeded random sample drawn as the corpus is read
(seeded per target, so a target's sample does not depend on the other targets; memory holds the
kept uses, whatever the corpus holds). Every token of a line is read (the reference reads 400);
given ``max_tokens``, a line's first ``max_tokens`` only, and the pipeline reads only the start of
the line that holds them (``leading_text``). The biLM runs a line as the elmo component does, in
consecutive windows of ``max_window`` (200) tokens, each its own sentence, once per distinct
window that holds a kept use; so a use's vector is the one ``embed-corpus`` stores for it.

An ``embed-corpus`` output folder serves as the corpus too (``embedded_usages``): the uses are found
in its rows (its tokens, whitespace-split as ``embed-corpus`` splits a line) and their vectors read
from the stored layers, without running the biLM; with the same model and layer, and text whose
tokens are whitespace-separated (as SemEval's corpora are), they are the uses and vectors the text
gives. A layer the folder does not hold, or weights other than the model asked for, are refused.

A use's vector is one layer of the biLM (an index, "top" for the last) or "mean", the average of
all layers (an ELMo mix with equal weights, simple_elmo's ``layers="average"``). A component's
learned mix is task-specific: a pipeline trained downstream has one per listener, the biLM none.

A ``UsageSet`` is written to Parquet (``write_usages``): one row per use with ``target``,
``doc_id`` (``FILE:LINE``, lines counted from 1), ``start_char`` and ``end_char`` (the token's
offsets in its line), ``token_index``, ``context`` (the line's tokens joined by spaces) and
``vector``; the file's metadata holds the settings. ``python -m spacy_elmo usages`` writes one.
"""
import io
import json
import re
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np

from ..bilm.batching import MAX_WINDOW
from ..io.embedded_corpus import EmbeddedFolder, embedded_folder, embedded_rows, float_values, is_embedded_folder
from ..io.text_input import Reservoir, TextStats, read_lines
from ..bilm.scalar_mix import Layer, select_layer

PathLike = Union[str, Path]
# tokens read per line: every one (a long line runs in windows, as the elmo component runs it)
MAX_TOKENS: Optional[int] = None
FORMAT = "spacy-elmo.usages"
LEMMATIZER_FACTORIES = ("lemmatizer", "trainable_lemmatizer")
# the biLM reads at most 50 characters of a token: the start of a line given to the pipeline holds at
# most this many characters per token kept (twice max_tokens of them)
CHARS_PER_TOKEN = 50
_RUN = re.compile(r"\S+")


@dataclass(frozen=True)
class Usage:
    """One use of a target.

    target (str): the target it matched. doc_id (str): ``FILE:LINE``.
    start_char, end_char (int): the token's offsets in its line. token_index (int): its index in
    ``tokens``. tokens (Tuple[str, ...]): the line's tokens (its first ``max_tokens`` where given).
    """

    target: str
    doc_id: str
    start_char: int
    end_char: int
    token_index: int
    tokens: Tuple[str, ...]


@dataclass(frozen=True)
class UsageSettings:
    """What a usage set depends on (written into its Parquet file).

    layer (Union[int, str]): the biLM layer, "top" or "mean". match (str): "lemma" or "form".
    max_uses (int): cap per target. seed (int): the sampling seed. max_tokens (Optional[int]): tokens
    read per line (None: every one). model (str): the biLM's name.
    """

    layer: Union[int, str]
    match: str
    max_uses: int
    seed: int
    max_tokens: Optional[int] = MAX_TOKENS
    model: str = ""


@dataclass
class UsageSet:
    """The usages of a corpus: per target, the uses and their vectors.

    settings (UsageSettings): how they were collected.
    usages (Dict[str, List[Usage]]): per target (every target asked for, possibly empty).
    vectors (Dict[str, np.ndarray]): per target, (n_uses, width) float32, row i for ``usages[t][i]``.
    found (Dict[str, int]): uses in the corpus before the cap.
    """

    settings: UsageSettings
    usages: Dict[str, List[Usage]]
    vectors: Dict[str, np.ndarray]
    found: Dict[str, int] = field(default_factory=dict)

    def matrix(self, target: str) -> np.ndarray:
        if target not in self.vectors:
            raise KeyError(f"{target!r} was not a target of this usage set ({len(self.vectors)} targets)")
        return self.vectors[target]


def parse_layer(text: Union[int, str], n_layers: Optional[int] = None) -> Layer:
    """ "top" -> -1, "mean" -> "mean", "2" -> 2; anything else, or an index a model of ``n_layers``
    output layers does not have, raises ValueError naming every choice."""
    top = "" if n_layers is None else f", layer {n_layers - 1}"
    indices = "a layer index" if n_layers is None else f"a layer index from 0 to {n_layers - 1}"
    choices = f"choose 'top' (the default{top}), 'mean' (of all layers) or {indices} (0 = the char-CNN; -1 = top)"
    if isinstance(text, int) or str(text).lstrip("-").isdigit():
        index = int(text)
        if n_layers is not None and not -n_layers <= index < n_layers:
            raise ValueError(f"--layers {text}: this model has {n_layers} layers; {choices}")
        return index
    if text in ("mean", "top"):
        return -1 if text == "top" else "mean"
    raise ValueError(f"--layers {text!r}: {choices}")


def corpus_lines(corpus: PathLike, *, strict_utf8: bool = False, stats: Optional[TextStats] = None) -> Iterator[Tuple[str, str]]:
    """(doc_id, line) for every non-empty line of the text input ``corpus`` names (a file, plain or
    compressed, or a folder of them: ``io.text_input.read_lines``); doc_id is ``NAME:LINE``. An
    ``embed-corpus`` output folder gives its rows' ids and tokens, each at its stored offsets with
    spaces between them (``stored_line``).

    strict_utf8 (bool): refuse a line that is not UTF-8. stats (Optional[TextStats]): counts the lines read.
    """
    if is_embedded_folder(corpus):
        yield from ((row.id, stored_line(row.tokens, row.starts)) for row in embedded_rows(embedded_folder(corpus)) if row.tokens)
        return
    if not Path(corpus).exists():
        raise FileNotFoundError(f"{corpus}: corpus not found (a text file, one document a line, or a folder of them)")
    for line in read_lines(corpus, strict_utf8=strict_utf8, stats=stats):
        if line.text.strip():
            yield line.place, line.text


def stored_line(tokens: Sequence[str], starts: Sequence[int]) -> str:
    """The line an embedded row was cut from, its whitespace as spaces: each token at its stored
    character offset, so that the offsets of uses found in it are those of the input line (tokens
    joined by single spaces would shift every use after a run of whitespace, a leading space or a tab).

    tokens (Sequence[str]): the row's tokens. starts (Sequence[int]): each one's offset in the line.
    RETURNS (str): the line.
    """
    pieces, at = [], 0
    for token, start in zip(tokens, starts):
        gap = start - at
        if pieces and gap < 1:  # offsets that overlap (not as embed-corpus writes them): still apart
            gap = 1
        pieces.append(" " * max(gap, 0) + token)
        at = start + len(token) if gap == start - at else at + gap + len(token)
    return "".join(pieces)


def case_keys(words: Iterable[str], *, where: str) -> Dict[str, str]:
    """The one case policy of targets and gold words: each is matched lower-cased, so two that differ
    only in case would be one target split in two; they are refused.

    where (str): what holds the words, for the error.
    RETURNS (Dict[str, str]): lower-cased word -> the word as given.
    """
    keys: Dict[str, str] = {}
    for word in words:
        other = keys.setdefault(word.lower(), word)
        if other != word:
            raise ValueError(f"{where}: {other!r} and {word!r} differ only in case; words are matched lower-cased "
                             "(the text's 'Bank' and 'bank' are one target), so give each word once")
    return keys


def read_targets(path: PathLike) -> List[str]:
    """Target words from a file, one a line (SemEval-2020 Task 1's ``targets.txt``; a line's first
    tab-separated field, so a gold file serves too). RETURNS (List[str]): in file order, unique;
    raises ValueError for two that differ only in case (``case_keys``)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: targets file not found (one target word a line)")
    targets = [line.split("\t")[0].strip() for line in path.read_text(encoding="utf-8").splitlines()]
    targets = list(dict.fromkeys(t for t in targets if t))
    if not targets:
        raise ValueError(f"{path}: no targets in the file")
    case_keys(targets, where=str(path))
    return targets


def load_tokenizer(pipeline: Optional[str] = None, *, lang: str = "en") -> Any:
    """The spaCy pipeline that finds the uses: ``pipeline`` (a package name or a directory, loaded
    with only the components lemmas need) or, without one, ``spacy.blank(lang)`` (word forms)."""
    import spacy

    if pipeline is None:
        return spacy.blank(lang)
    if not (spacy.util.is_package(pipeline) or Path(pipeline).is_dir()):
        raise ValueError(f"{pipeline}: no spaCy pipeline of that name is installed, nor a folder of that name; "
                         f"install it (python -m spacy download {pipeline}) or give a pipeline folder")
    nlp = spacy.load(pipeline, exclude=["ner", "parser", "textcat", "textcat_multilabel", "elmo"])
    return nlp


def match_mode(nlp: Any) -> str:
    """"lemma" when the pipeline has a lemmatizer, else "form"."""
    factories = {nlp.get_pipe_meta(name).factory for name in nlp.pipe_names}
    return "lemma" if factories & set(LEMMATIZER_FACTORIES) else "form"


def leading_text(text: str, max_tokens: int) -> str:
    """The start of a line that holds its first ``max_tokens`` tokens: up to the end of its
    ``2 * max_tokens``-th run of non-space characters (a tokenizer splits at spaces first and every
    run gives a token or more; the margin leaves a lemmatizer's tagger its usual context at the cut),
    and at most ``2 * max_tokens * CHARS_PER_TOKEN`` characters.

    RETURNS (str): the text itself where it is no longer than that.
    """
    limit = 2 * max_tokens * CHARS_PER_TOKEN
    if len(text) <= limit:
        return text
    end = 0
    for end_of_run, _ in zip((m.end() for m in _RUN.finditer(text, 0, limit)), range(2 * max_tokens)):
        end = end_of_run
    return text[: end or limit]


@dataclass
class FoundUsages:
    """The uses of the targets a pass over a corpus kept, and how many it saw.

    uses (Dict[str, List[Usage]]): per target (as given), the kept uses in corpus order: every use,
        or a seeded sample of ``max_uses`` where the corpus holds more.
    seen (Dict[str, int]): per target, its uses in the corpus.
    match (str): "lemma" or "form".
    """

    uses: Dict[str, List[Usage]]
    seen: Dict[str, int]
    match: str


def find_usages(
    nlp: Any, lines: Iterable[Tuple[str, str]], targets: Sequence[str], *, max_uses: int, seed: int = 0,
    max_tokens: Optional[int] = MAX_TOKENS, batch_size: int = 256,
) -> FoundUsages:
    """The uses of the targets in the lines (no biLM yet), at most ``max_uses`` a target: a seeded
    sample of every use (``io.text_input.Reservoir``, seeded per target, so a target's sample does not
    depend on the other targets), drawn as the lines go by, so memory holds ``max_uses`` uses a target
    whatever the corpus holds.

    nlp (Language): tokenizes (and lemmatizes, where it can) each line.
    lines (Iterable[Tuple[str, str]]): (doc_id, text), as ``corpus_lines`` gives them.
    targets (Sequence[str]): lemmas or word forms; matched lower-cased (two that differ only in case
        are refused: ``case_keys``).
    max_uses (int): uses kept a target. seed (int): the sample's seed.
    max_tokens (Optional[int]): tokens read per line; None: every one (a line longer than the
        pipeline's ``nlp.max_length`` characters is then refused, naming it).
    RETURNS (FoundUsages): the kept uses, the uses seen and the match mode.
    """
    mode = match_mode(nlp)
    wanted, samples = _samples(targets, max_uses, seed)
    pairs = ((_line_text(nlp, doc_id, text, max_tokens), doc_id) for doc_id, text in lines)
    for doc, doc_id in nlp.pipe(pairs, as_tuples=True, batch_size=batch_size):
        words = [t for t in doc if not t.is_space][:max_tokens]
        tokens = tuple(t.text for t in words)
        for i, token in enumerate(words):
            key = (token.lemma_ if mode == "lemma" else token.text).lower()
            if key in wanted:
                target = wanted[key]
                samples[target].offer(Usage(target, doc_id, token.idx, token.idx + len(token.text), i, tokens))
    return FoundUsages({t: s.kept() for t, s in samples.items()}, {t: s.seen for t, s in samples.items()}, mode)


def _samples(targets: Sequence[str], max_uses: int, seed: int) -> Tuple[Dict[str, str], Dict[str, Reservoir]]:
    """The targets by their lower-cased key (``case_keys``), and each one's seeded sample."""
    if max_uses < 1:
        raise ValueError(f"max_uses must be at least 1, not {max_uses}")
    return case_keys(targets, where="the targets"), {t: Reservoir(max_uses, f"{seed}:{t}") for t in targets}


def _line_text(nlp: Any, doc_id: str, text: str, max_tokens: Optional[int]) -> str:
    """What the pipeline reads of a line: the start that holds ``max_tokens`` tokens, or all of it."""
    if max_tokens is not None:
        return leading_text(text, max_tokens)
    if len(text) > nlp.max_length:
        raise ValueError(f"{doc_id}: a line of {len(text)} characters, more than the pipeline reads at once "
                         f"(nlp.max_length, {nlp.max_length}); give --max-tokens N to read its first N tokens")
    return text


def usage_vectors(
    bilm: Any, contexts: Sequence[Tuple[Sequence[str], int]], *, layer: Layer = -1, batch_size: int = 32,
    max_window: int = MAX_WINDOW,
) -> np.ndarray:
    """The vectors of tokens in context, the line run as the elmo component runs it: in consecutive
    windows of ``max_window`` tokens, each its own sentence (``bilm.batching.windows``); each distinct
    window that holds a use runs through the biLM once.

    bilm (BiLM): the model (anything with ``embed``).
    contexts (Sequence[Tuple[Sequence[str], int]]): (the line's tokens, index of the use).
    layer (Layer): a layer index or "mean".
    RETURNS (np.ndarray): (len(contexts), width) float32.
    """
    distinct: Dict[Tuple[str, ...], int] = {}
    placed = []
    for tokens, position in contexts:
        if not 0 <= position < len(tokens):
            raise ValueError(f"position {position} is outside a context of {len(tokens)} tokens")
        begin = position - position % max_window
        window = tuple(tokens[begin : begin + max_window])
        placed.append((distinct.setdefault(window, len(distinct)), position - begin))
    if not distinct:
        return np.zeros((0, 2 * bilm.config.projection_dim), dtype=np.float32)
    layers = bilm.embed([list(window) for window in distinct], batch_size=batch_size)
    selected = [select_layer(arrays, layer) for arrays in layers]
    return np.stack([selected[window][position] for window, position in placed]).astype(np.float32, copy=False)


def stored_columns(folder: EmbeddedFolder, layer: Layer, asked: Union[int, str]) -> List[str]:
    """The columns of an embedded folder that give ``layer`` (an index, or "mean": its own column,
    or every layer's). RETURNS (List[str]): raises ValueError where the folder does not hold them."""
    every = [f"layer_{j}" for j in range(folder.n_layers)]
    if layer == "mean":
        options = [["mean"], every]
        needs = "--layers mean or all"
    else:
        options = [[f"layer_{int(layer) % folder.n_layers}"]]
        needs = f"--layers all, top or {int(layer) % folder.n_layers}" if int(layer) % folder.n_layers == folder.n_layers - 1 \
            else f"--layers all or {int(layer) % folder.n_layers}"
    for columns in options:
        if all(column in folder.columns for column in columns):
            return columns
    raise ValueError(f"{folder.path}: holds {', '.join(folder.columns)} (embed-corpus --layers {folder.layers}), not "
                     f"what --layers {asked} reads; embed the corpus with {needs}, or choose a layer it holds")


def embedded_usages(
    folder: PathLike, targets: Sequence[str], *, nlp: Any = None, layer: Union[int, str] = "top", max_uses: int = 1000,
    seed: int = 0, weights_sha256: Optional[str] = None,
) -> UsageSet:
    """The usage matrices of ``targets`` from a finished ``embed-corpus`` folder: the uses found in its
    rows (tokens as stored; lemmas where ``nlp`` has a lemmatizer, run on those tokens), sampled as
    ``find_usages`` samples them, and their vectors read from the stored layers (no biLM runs).

    weights_sha256 (Optional[str]): the weights the vectors must come from (a model the user named);
        None: the folder's own.
    RETURNS (UsageSet): as ``collect_usages``; raises ValueError for other weights, or a layer the
        folder does not hold.
    """
    embedded = embedded_folder(folder)
    if weights_sha256 is not None and weights_sha256 != embedded.weights_sha256:
        raise ValueError(f"{folder}: embedded with {embedded.model} (weights SHA-256 {embedded.weights_sha256[:12]}...), "
                         f"not with the model given (weights SHA-256 {weights_sha256[:12]}...); give no model to use "
                         "the folder's, or embed the corpus with that one")
    chosen = parse_layer(layer, embedded.n_layers)
    columns = stored_columns(embedded, chosen, layer)
    mode = "form" if nlp is None else match_mode(nlp)
    wanted, samples = _samples(targets, max_uses, seed)
    for row in embedded_rows(embedded, columns):
        tokens = tuple(row.tokens)
        for i, key in enumerate(_token_keys(nlp, mode, row.tokens)):
            if key not in wanted:
                continue
            sample = samples[wanted[key]]
            place = sample.slot()
            if place is not None:  # the vector of a kept use only
                vector = np.stack([float_values(row.layers[c][i], embedded.dtype) for c in columns]).mean(axis=0) \
                    if len(columns) > 1 else float_values(row.layers[columns[0]][i], embedded.dtype)
                sample.put(place, (Usage(wanted[key], row.id, row.starts[i], row.ends[i], i, tokens), vector))
    kept = {t: s.kept() for t, s in samples.items()}
    vectors = {t: np.stack([v for _, v in uses]).astype(np.float32) if uses else np.zeros((0, embedded.width), np.float32)
               for t, uses in kept.items()}
    settings = UsageSettings(layer=layer, match=mode, max_uses=max_uses, seed=seed, max_tokens=None, model=embedded.model)
    return UsageSet(settings, {t: [u for u, _ in uses] for t, uses in kept.items()}, vectors,
                    {t: s.seen for t, s in samples.items()})


def _token_keys(nlp: Any, mode: str, tokens: Sequence[str]) -> List[str]:
    """What a stored line's tokens are matched by: lower-cased lemmas (``nlp`` run on them) or forms."""
    if mode == "form" or not tokens:
        return [token.lower() for token in tokens]
    from spacy.tokens import Doc

    doc = Doc(nlp.vocab, words=list(tokens))
    for _, pipe in nlp.pipeline:
        doc = pipe(doc)
    return [token.lemma_.lower() for token in doc]


def collect_usages(
    bilm: Any,
    corpus: PathLike,
    targets: Sequence[str],
    *,
    nlp: Any = None,
    lang: str = "en",
    layer: Union[int, str] = "top",
    max_uses: int = 1000,
    seed: int = 0,
    max_tokens: Optional[int] = MAX_TOKENS,
    batch_size: int = 32,
    model: str = "",
    strict_utf8: bool = False,
    stats: Optional[TextStats] = None,
) -> UsageSet:
    """The usage matrices of ``targets`` in ``corpus`` (see the module docstring).

    bilm (BiLM): the model.
    corpus (PathLike): a text file, one document a line, or a folder of them.
    targets (Sequence[str]): target lemmas or word forms.
    nlp (Optional[Language]): the spaCy pipeline that tokenizes (default ``spacy.blank(lang)``,
        which has no lemmatizer: word forms are matched).
    layer (Union[int, str]): a layer index, "top" or "mean".
    max_uses (int): cap per target (seeded sample). seed (int): its seed.
    model (str): the biLM's name, for the settings.
    strict_utf8 (bool), stats (Optional[TextStats]): as ``corpus_lines`` reads the corpus.
    RETURNS (UsageSet): the uses, their vectors, and how many were found before the cap.
    """
    if not targets:
        raise ValueError("no targets given")
    chosen = parse_layer(layer, bilm.config.n_output_layers)
    if nlp is None:
        import spacy

        nlp = spacy.blank(lang)
    found = find_usages(nlp, corpus_lines(corpus, strict_utf8=strict_utf8, stats=stats), targets, max_uses=max_uses,
                        seed=seed, max_tokens=max_tokens)
    kept = found.uses
    every = [u for t in targets for u in kept[t]]
    matrix = usage_vectors(bilm, [(u.tokens, u.token_index) for u in every], layer=chosen, batch_size=batch_size)
    vectors, offset = {}, 0
    for t in targets:
        vectors[t] = matrix[offset : offset + len(kept[t])]
        offset += len(kept[t])
    settings = UsageSettings(layer=layer, match=found.match, max_uses=max_uses, seed=seed, max_tokens=max_tokens, model=model)
    return UsageSet(settings, kept, vectors, dict(found.seen))


def write_usages(usage_set: UsageSet, path: PathLike) -> Path:
    """Write a usage set to one Parquet file (columns in the module docstring).

    RETURNS (Path): the file.
    """
    pa, pq = _pyarrow()
    from ..files import write_atomic

    rows = [(t, u, v) for t, uses in usage_set.usages.items() for u, v in zip(uses, usage_set.vectors[t])]
    widths = {v.shape[1] for v in usage_set.vectors.values()}
    if len(widths) != 1:
        raise ValueError(f"a usage set's vectors have one width, not {sorted(widths)}")
    width = widths.pop()
    values = np.concatenate([v.reshape(-1) for v in usage_set.vectors.values()]).astype(np.float32)
    table = pa.table({
        "target": pa.array([t for t, _, _ in rows], type=pa.string()),
        "doc_id": pa.array([u.doc_id for _, u, _ in rows], type=pa.string()),
        "start_char": pa.array([u.start_char for _, u, _ in rows], type=pa.int32()),
        "end_char": pa.array([u.end_char for _, u, _ in rows], type=pa.int32()),
        "token_index": pa.array([u.token_index for _, u, _ in rows], type=pa.int32()),
        "context": pa.array([" ".join(u.tokens) for _, u, _ in rows], type=pa.string()),
        "vector": pa.FixedSizeListArray.from_arrays(pa.array(values, type=pa.float32()), width),
    })
    metadata = {"format": FORMAT, "settings": asdict(usage_set.settings), "found": usage_set.found,
                "targets": list(usage_set.usages), "width": width}
    table = table.replace_schema_metadata({"spacy_elmo.usages": json.dumps(metadata)})
    buffer = io.BytesIO()
    pq.write_table(table, buffer)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, buffer.getvalue())
    return path


def read_usages(path: PathLike) -> UsageSet:
    """A usage set written by ``write_usages``.

    RETURNS (UsageSet): every target it was collected for, with its uses and vectors.
    """
    _, pq = _pyarrow()
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: usages file not found")
    table = pq.read_table(path)
    raw = (table.schema.metadata or {}).get(b"spacy_elmo.usages")
    if raw is None:
        raise ValueError(f"{path}: not a usages file written by `usages` (no spacy_elmo.usages metadata)")
    metadata = json.loads(raw)
    settings = UsageSettings(**metadata["settings"])
    width = int(metadata["width"])
    columns = {name: table.column(name).to_pylist() for name in ("target", "doc_id", "start_char", "end_char", "token_index", "context")}
    flat = table.column("vector").combine_chunks().flatten().to_numpy(zero_copy_only=False)
    matrix = np.asarray(flat, dtype=np.float32).reshape(len(table), width)
    usages: Dict[str, List[Usage]] = {t: [] for t in metadata["targets"]}
    rows: Dict[str, List[int]] = {t: [] for t in metadata["targets"]}
    for i, target in enumerate(columns["target"]):
        usages[target].append(Usage(target, columns["doc_id"][i], columns["start_char"][i], columns["end_char"][i],
                                    columns["token_index"][i], tuple(columns["context"][i].split(" "))))
        rows[target].append(i)
    vectors = {t: matrix[rows[t]] if rows[t] else np.zeros((0, width), np.float32) for t in usages}
    return UsageSet(settings, usages, vectors, {t: int(n) for t, n in metadata["found"].items()})


def _pyarrow() -> Tuple[Any, Any]:
    try:
        import pyarrow
        import pyarrow.parquet
    except ImportError as err:
        raise ImportError(f"usages files are Parquet, which needs pyarrow ({err}): pip install pyarrow "
                          "(or spacy-elmo[ray], which brings it)") from None
    return pyarrow, pyarrow.parquet


def load_usages_or_collect(
    source: PathLike, bilm_loader: Any, targets: Sequence[str], *, expected_weights: Optional[Any] = None, **options: Any
) -> UsageSet:
    """A usages Parquet file as written, an ``embed-corpus`` folder's stored vectors
    (``embedded_usages``), or a corpus collected now (``bilm_loader()`` gives the model only when one
    is needed). A file's targets are matched to ``targets`` as the text is, lower-cased, and renamed
    to their spelling there.

    expected_weights (Optional[Callable[[], str]]): where the user named a model, gives its weights'
        SHA-256, which an embedded folder must have been made with.
    """
    if is_embedded_folder(source):
        return embedded_usages(source, targets, nlp=options.get("nlp"), layer=options.get("layer", "top"),
                               max_uses=options.get("max_uses", 1000), seed=options.get("seed", 0),
                               weights_sha256=expected_weights() if expected_weights is not None else None)
    if Path(source).is_file() and Path(source).suffix == ".parquet":
        found = read_usages(source)
        spelled = {t.lower(): t for t in found.usages}
        missing = [t for t in targets if t.lower() not in spelled]
        if missing:
            raise ValueError(f"{source}: collected without the targets {missing[:5]}; collect them again with `usages`")
        for target in targets:
            own = spelled[target.lower()]
            if own != target:
                found.usages[target] = [replace(u, target=target) for u in found.usages.pop(own)]
                found.vectors[target] = found.vectors.pop(own)
                found.found[target] = found.found.pop(own)
        return found
    return collect_usages(bilm_loader(), source, targets, **options)
