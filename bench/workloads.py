"""Models and sentences for the benchmarks: published shapes with random weights, real English text.

The text is UD English EWT (CoNLL-U), from the files the ``--test-data`` and ``--train-data``
options name. By default they are the project's data: ``ud_english_ewt/en_ewt-ud-{test,train}.conllu``
(assets of project.yml) in the data folder that ``--data-dir`` names, else ``$SPACY_ELMO_DATA``, else
``assets/datasets`` under the working directory, as the probes find theirs
(``spacy_elmo.probes.task_data.default_data_dir``); ``python -m spacy project assets --extra``
fetches them (docs/datasets.md). ``--quick`` smoke runs read the sample shipped in the repository
(``sample/ewt``) unless a file or folder is named. A file that is not there is an error that says
how to get it.
"""
import argparse
import json
import os
import shlex
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch

from spacy_elmo.bilm import BiLM, BiLMConfig, batch_char_ids, token_char_ids
from spacy_elmo.bilm.chars import BOS_TOKEN, EOS_TOKEN
from spacy_elmo.io import export_allennlp, load_allennlp
from spacy_elmo.probes.task_data import DATA_ENV, FETCH, PROJECT_DATA, default_data_dir
from spacy_elmo.records.provenance import data_record, model_record, portable_args, provenance

FULL_FILTERS = ((1, 32), (2, 32), (3, 64), (4, 128), (5, 256), (6, 512), (7, 1024))
# The published architectures (file names of the AllenNLP downloads), and a tiny one for smoke tests.
SHAPES: Dict[str, BiLMConfig] = {
    "full": BiLMConfig(filters=FULL_FILTERS, n_highway=2, dim=4096, projection_dim=512),
    "small": BiLMConfig(filters=FULL_FILTERS, n_highway=1, dim=1024, projection_dim=128),
    "tiny": BiLMConfig(char_embedding_dim=4, filters=((1, 8), (2, 8), (3, 16)), n_highway=1, dim=32, projection_dim=16),
}
PUBLISHED_NAMES = {
    "full": "2x4096_512_2048cnn_2xhighway",
    "small": "2x1024_128_2048cnn_1xhighway",
    "tiny": "tiny",
    "shipped": "en_small, the model shipped with the package (trained weights, the component's default)",
}
REPO = Path(__file__).resolve().parent.parent
EWT_ASSET = "ud_english_ewt/en_ewt-ud-{split}.conllu"  # under the data folder (project.yml's vars.datasets)
SAMPLE_EWT = REPO / "sample" / "ewt"


def default_ewt(split: str, data_dir: Optional[Path] = None) -> Path:
    """EWT's ``split`` ("train", "dev", "test") in ``data_dir``, else in the probes' default data
    folder (``$SPACY_ELMO_DATA``, else ``./assets/datasets``)."""
    root = Path(data_dir) if data_dir is not None else default_data_dir()
    return root / EWT_ASSET.format(split=split)


def add_data_options(parser: argparse.ArgumentParser, *, test: bool = False, train: bool = False) -> None:
    """``--test-data`` (the sentences measured) and/or ``--train-data`` (training text) options, and
    ``--data-dir`` (the folder their defaults are in); ``resolve_data_options`` fills them in."""
    parser.add_argument("--data-dir", type=Path, default=None, metavar="DIR",
                        help=f"the datasets folder (default: ${DATA_ENV}, else ./{PROJECT_DATA.as_posix()}; "
                        "--quick: the shipped sample/ewt)")
    if test:
        parser.add_argument("--test-data", type=Path, default=None, metavar="CONLLU",
                            help=f"sentences to measure (default: DIR/{EWT_ASSET.format(split='test')})")
    if train:
        parser.add_argument("--train-data", type=Path, default=None, metavar="CONLLU",
                            help=f"training text (default: DIR/{EWT_ASSET.format(split='train')})")


def resolve_data_options(args: argparse.Namespace) -> argparse.Namespace:
    """Fill in ``args.test_data`` / ``args.train_data`` left unset: from ``--data-dir``, else the
    shipped sample for a ``--quick`` run, else the default data folder. RETURNS ``args``."""
    for split in ("test", "train"):
        name = f"{split}_data"
        if hasattr(args, name) and getattr(args, name) is None:
            if args.data_dir is None and getattr(args, "quick", False):
                setattr(args, name, SAMPLE_EWT / f"{split}.conllu")
            else:
                setattr(args, name, default_ewt(split, args.data_dir))
    return args


def data_file(path: Optional[Path], split: str) -> Path:
    """``path``, or the default file of ``split``; an error if the file is not there (for one of the
    project's assets, the error names the asset and how to fetch it or point at it)."""
    path = Path(path) if path is not None else default_ewt(split)
    if not path.is_file():
        option = "--test-data" if split == "test" else "--train-data"
        asset = EWT_ASSET.format(split=split)
        how = f"name a CoNLL-U file with {option}"
        if path.as_posix().endswith(asset):
            how = (f"it is the project.yml asset ${{vars.datasets}}/{asset}: fetch it with `{FETCH}` in a"
                   f" spacy-elmo checkout (into {PROJECT_DATA.as_posix()}/), or point --data-dir or {DATA_ENV}"
                   f" at a folder that holds it, or {how} (the shipped sample: sample/ewt/{split}.conllu);"
                   " see docs/datasets.md")
        raise FileNotFoundError(f"{path}: no such file ({how})")
    return path


def bench_command(module: str, argv: Optional[Sequence[str]]) -> str:
    """RETURNS (str): a benchmark's command line as its record writes it (``python -m MODULE ARGS``,
    paths portable: no machine's directories)."""
    return shlex.join(["python", "-m", module, *portable_args(list(sys.argv[1:] if argv is None else argv))])


def shapes_model(shapes: Sequence[str]) -> Dict[str, Any]:
    """The model fields of a benchmark's results record (``spacy_elmo.records.provenance``): the shipped biLM
    where a shape is "shipped"; the other shapes are random weights, which ``model_note`` names."""
    random = [shape for shape in shapes if shape != "shipped"]
    fields: Dict[str, Any] = {"model": model_record() if "shipped" in shapes else None}
    if random:
        fields["model_note"] = (f"random weights (torch seed 0) of the shape{'s' if len(random) > 1 else ''} "
                                + ", ".join(PUBLISHED_NAMES.get(shape, shape) for shape in random))
    return fields


def display_path(path: Path) -> str:
    """How a report names ``path`` (no machine's directories): relative to the checkout when inside it,
    else "the datasets folder's ud_english_ewt/..." for one of the project's data files (the folder
    project.yml's ``vars.datasets`` names), else its name."""
    path = Path(path).resolve()
    try:
        return path.relative_to(REPO).as_posix()
    except ValueError:
        pass
    tail = "/".join(path.parts[-2:])
    if any(tail == EWT_ASSET.format(split=split) for split in ("train", "dev", "test")):
        return f"the datasets folder's {tail}"
    return path.name


def published_bilm(shape: str, workdir: Path, *, seed: int = 0) -> BiLM:
    """A biLM of a published shape with random weights, written in the published format and read back
    (``shipped``: the package's own trained model, written and read back the same way)."""
    torch.manual_seed(seed)
    if shape == "shipped":
        from spacy_elmo.io.loading import resolve_bilm

        bilm = resolve_bilm()
        options, weights = workdir / "shipped_options.json", workdir / "shipped_weights.hdf5"
        export_allennlp(bilm, options, weights)
        return load_allennlp(options, weights)
    bilm = BiLM(SHAPES[shape])
    options, weights = workdir / f"{shape}_options.json", workdir / f"{shape}_weights.hdf5"
    export_allennlp(bilm, options, weights)
    del bilm
    return load_allennlp(options, weights)


def conllu_sentences(path: Path) -> List[List[str]]:
    sentences, current = [], []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            if current:
                sentences.append(current)
            current = []
        elif not line.startswith("#"):
            cols = line.split("\t")
            if cols[0].isdigit():
                current.append(cols[1])
    if current:
        sentences.append(current)
    return sentences


def benchmark_sentences(
    n: int, path: Optional[Path] = None, *, min_len: int = 20, max_len: int = 30
) -> Tuple[List[List[str]], str]:
    """The first ``n`` sentences of min_len..max_len tokens of the CoNLL-U file ``path`` (default:
    EWT's test set, see ``default_ewt``). RETURNS (sentences, source)."""
    test = data_file(path, "test")
    pool = [s for s in conllu_sentences(test) if min_len <= len(s) <= max_len]
    if len(pool) < n:
        raise ValueError(f"{display_path(test)} has {len(pool)} sentences of {min_len}-{max_len} tokens, not {n}: "
                         "ask for fewer or name a larger file")
    return pool[:n], f"{display_path(test)}, first {n} sentences of {min_len}-{max_len} tokens"


def frequent_tokens(limit: int, path: Optional[Path] = None) -> List[str]:
    """The ``limit`` most frequent tokens of the CoNLL-U file ``path`` (default: EWT's training set,
    disjoint from the test sentences)."""
    counts = Counter(token for sentence in conllu_sentences(data_file(path, "train")) for token in sentence)
    return [token for token, _ in counts.most_common(limit)]


def first_batch(sentences: Sequence[Sequence[str]], max_sentences: int, max_tokens: int) -> List[List[str]]:
    """Consecutive sentences from the start, at most ``max_sentences`` of them and ``max_tokens``
    tokens (as a length bucket of the training batches fills)."""
    batch: List[List[str]] = []
    total = 0
    for sentence in sentences:
        if len(batch) == max_sentences or total + len(sentence) > max_tokens:
            break
        batch.append(list(sentence))
        total += len(sentence)
    return batch


def char_batch(sentences: Sequence[Sequence[str]], max_chars: int) -> Tuple[torch.Tensor, torch.Tensor]:
    ids, lengths = batch_char_ids(sentences, max_chars)
    return torch.from_numpy(ids), torch.from_numpy(lengths)


def flops_per_position(config: BiLMConfig) -> Dict[str, float]:
    """Multiply-adds x 2 of one position (token or boundary): "char_cnn", "lstm", "total"."""
    chars, emb = config.max_characters_per_token, config.char_embedding_dim
    conv = sum(2 * (chars - w + 1) * w * emb * n for w, n in config.filters)
    f, p, d = config.n_filters, config.projection_dim, config.dim
    char_cnn = conv + config.n_highway * 2 * (2 * f * f) + 2 * f * p
    lstm = 2 * config.n_layers * 2 * (p * 4 * d + p * 4 * d + d * p)
    return {"char_cnn": float(char_cnn), "lstm": float(lstm), "total": float(char_cnn + lstm)}


def work_done(config: BiLMConfig, runs, cached_tokens: Sequence[str] = ()) -> Dict[str, float]:
    """The FLOPs the optimized path does on ``runs`` (batches of (char ids, lengths)), against the
    nominal count (every running position through the whole model; padding is never counted).

    The optimized path encodes each batch's distinct tokens once, and not at all those in a
    vocabulary-filled char-CNN cache (``cached_tokens``); it computes the first LSTM layer's input
    projections once per distinct token of a batch. Everything else runs at every position.
    RETURNS (Dict[str, float]): positions, distinct_tokens, uncached_tokens, nominal_flops,
        done_flops, removed_flops (by the caches and the sharing) and removed_fraction.
    """
    flops = flops_per_position(config)
    first_input = 2.0 * 2 * config.projection_dim * 4 * config.dim  # both directions, one row
    # a filled cache holds the boundary tokens too
    tokens = [BOS_TOKEN, EOS_TOKEN, *cached_tokens] if cached_tokens else []
    cached = {np.asarray(token_char_ids(t, config.max_characters_per_token), dtype=np.int32).tobytes() for t in tokens}
    positions = distinct = uncached = 0
    for ids, lengths in runs:
        array = ids.numpy().astype(np.int32)
        rows = {array[b, t].tobytes() for b in range(len(lengths)) for t in range(int(lengths[b]))}
        positions += int(lengths.sum())
        distinct += len(rows)
        uncached += len(rows - cached)
    nominal = positions * flops["total"]
    done = uncached * flops["char_cnn"] + distinct * first_input + positions * (flops["lstm"] - first_input)
    return {
        "positions": positions, "distinct_tokens": distinct, "uncached_tokens": uncached,
        "nominal_flops": nominal, "done_flops": done, "removed_flops": nominal - done,
        "removed_fraction": (nominal - done) / nominal if nominal else 0.0,
    }


def recurrent_bytes_per_step(config: BiLMConfig, bytes_per_weight: int = 4) -> int:
    """Bytes of recurrent weights (state product and projection, all layers, both directions) per timestep."""
    p, d = config.projection_dim, config.dim
    return 2 * config.n_layers * (p * 4 * d + d * p) * bytes_per_weight


def cosines(reference: np.ndarray, other: np.ndarray) -> np.ndarray:
    """Per-vector cosine along the last axis."""
    num = (reference * other).sum(-1)
    den = np.linalg.norm(reference, axis=-1) * np.linalg.norm(other, axis=-1)
    return num / np.maximum(den, 1e-30)


def write_report(report: Dict[str, Any], text: Optional[str], json_path: Optional[str], markdown_path: Optional[str]) -> None:
    """A benchmark's record as JSON at ``json_path`` and its report ``text`` at ``markdown_path`` (each
    where given), their folders made."""
    for path, content in ((json_path, json.dumps(report, indent=2)), (markdown_path, text)):
        if path and content is not None:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            Path(path).write_text(content, encoding="utf-8")


def finish_random_shape_report(
    report: Dict[str, Any], args: argparse.Namespace, started: float, markdown: Callable[[Dict[str, Any]], str]
) -> Dict[str, Any]:
    """The end of a benchmark of a published shape with random weights on ``--test-data``'s sentences:
    the load after, the provenance, the seconds it took; the report printed and written
    (``--json``, ``--markdown``). RETURNS ``report``."""
    report["shape"] = PUBLISHED_NAMES.get(args.shape, args.shape)
    report["machine"]["load_average_after"] = list(os.getloadavg())
    report["provenance"] = provenance(
        model=None, model_note=f"random weights (torch seed 0) of the shape {report['shape']}",
        data=data_record([data_file(args.test_data, "test")]))
    report["seconds"] = time.time() - started
    text = markdown(report)
    print(text)
    write_report(report, text, args.json, args.markdown)
    return report
