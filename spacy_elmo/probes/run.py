"""``run_probe``: what each biLM layer knows, measured on syntax (UPOS, NER) and word sense (WSD, WiC)."""
import sys
import time
from pathlib import Path
from typing import IO, Any, Callable, Dict, Optional, Sequence, Union

from ..io import load_bilm
from ..bilm import BiLM
from ..records.provenance import data_record, model_name, model_record, provenance
from .conllu import PathLike
from .features import Embedder, VectorCache, weights_hash
from .report import write_report
from .result import ProbeResult, TaskResult
from .sense import probe_wic, probe_wsd
from .tagging import probe_tagging
from .task_data import TaskData, load_task_data, parse_tasks, task_files

RUNNERS: Dict[str, Callable[..., TaskResult]] = {
    "upos": probe_tagging, "ner": probe_tagging, "wsd": probe_wsd, "wic": probe_wic,
}


def run_probe(
    tasks: Union[str, Sequence[str]] = "all",
    *,
    bilm: Optional[Embedder] = None,
    model: Optional[PathLike] = None,
    options: Optional[PathLike] = None,
    weights: Optional[PathLike] = None,
    train: Optional[PathLike] = None,
    eval: Optional[PathLike] = None,
    train_fraction: Optional[float] = None,
    max_sentences: Optional[int] = None,
    seed: int = 0,
    data_dir: Optional[PathLike] = None,
    cache_dir: Optional[PathLike] = None,
    batch_size: int = 64,
    output: Optional[PathLike] = None,
    command: Optional[str] = None,
    stream: Optional[IO[str]] = None,
) -> ProbeResult:
    """Probe every layer of a biLM alone, their mean and a learned scalar mix on one or more tasks.

    tasks (Union[str, Sequence[str]]): "all" (upos, wsd, wic), a task, or several ("upos,ner").
    bilm (Optional[Embedder]): a loaded model (or any object with ``BiLM.embed``); else ``load_bilm``
        (its inference fast path) of ``model``, or ``options`` + ``weights``, or the shipped model.
    train, eval (Optional[PathLike]): the task's files (one task only); defaults under ``data_dir``.
    train_fraction (Optional[float]): seeded share of the training data; None: each task's default.
    max_sentences (Optional[int]): at most this many train and eval items per task.
    seed (int): for every sample, split and classifier.
    data_dir (Optional[PathLike]): where the default data lie (None: ``$SPACY_ELMO_DATA``, else
        ``assets/datasets`` under the working directory, as ``task_data.default_data_dir``).
    cache_dir (Optional[PathLike]): keep the biLM's vectors on disk here, by weights and file hash.
    output (Optional[PathLike]): write probe.json, probe.md and probe.png here.
    command (Optional[str]): how the run was started, for the record (default: this process's command).
    stream (Optional[IO[str]]): progress lines (stderr by default).
    RETURNS (ProbeResult): scores per task and representation; ``result.table()`` is the Markdown table.
    """
    stream = stream if stream is not None else sys.stderr
    names = parse_tasks(tasks)
    if len(names) > 1 and (train is not None or eval is not None):
        raise ValueError(f"train and eval files name one task's data; give one task, not {', '.join(names)}")
    start, cpu_start = time.monotonic(), time.process_time()
    files = {task: task_files(task, train, eval, data_dir) for task in names}
    data = {
        task: load_task_data(task, *files[task], train_fraction=train_fraction, max_items=max_sentences, seed=seed)
        for task in names
    }
    source = _describe_source(bilm, model, options, weights)
    bilm_given = bilm is not None
    if bilm is None:
        bilm = load_bilm(model, options=options, weights=weights)
    digest = weights_hash(bilm)
    cache = VectorCache(bilm, model_hash=digest, directory=Path(cache_dir) if cache_dir else None, batch_size=batch_size, stream=stream)
    results = []
    for task in names:
        result = _run_task(data[task], cache, seed)
        stream.write(f"{task}: done in {result.seconds:.0f} s ({result.cpu_seconds:.0f} s CPU); best single layer: {result.best_layer()}\n")
        results.append(result)
    probe = ProbeResult(
        tasks=results,
        model=_model_record(bilm, source, digest),
        settings={"tasks": list(names), "seed": seed, "train_fraction": train_fraction, "max_sentences": max_sentences,
                  "batch_size": batch_size},
        provenance=_provenance(command, bilm_given, digest, model, options, weights, files),
        embedding={"tokens": cache.tokens_embedded, "seconds": round(cache.seconds, 2),
                   "tokens_per_s": round(cache.tokens_embedded / cache.seconds, 1) if cache.seconds else None},
        seconds=time.monotonic() - start,
        cpu_seconds=time.process_time() - cpu_start,
    )
    if output is not None:
        write_report(probe, Path(output))
    return probe


class TrainingProbe:
    """A probe run on the model being trained at each evaluation (the ``[probe]`` config section).

    The files are checked when it is made and read on the first call; each call runs the biLM
    afresh (its weights have changed), quietly.
    """

    def __init__(
        self,
        task: str,
        *,
        train: Optional[PathLike] = None,
        eval: Optional[PathLike] = None,
        train_fraction: Optional[float] = None,
        max_sentences: Optional[int] = None,
        seed: int = 0,
    ) -> None:
        names = parse_tasks(task)
        if len(names) != 1:
            raise ValueError(f"a training probe runs one task, not {', '.join(names)}")
        self.task = names[0]
        self.files = task_files(self.task, train, eval)
        self.train_fraction, self.max_sentences, self.seed = train_fraction, max_sentences, seed
        self._data: Optional[TaskData] = None

    def __call__(self, bilm: BiLM) -> TaskResult:
        if self._data is None:
            self._data = load_task_data(
                self.task, *self.files, train_fraction=self.train_fraction, max_items=self.max_sentences, seed=self.seed
            )
        return _run_task(self._data, VectorCache(bilm, model_hash="training", quiet=True), self.seed)


def _run_task(data: TaskData, cache: VectorCache, seed: int) -> TaskResult:
    began, cpu_began = time.monotonic(), time.process_time()
    result = RUNNERS[data.task](data, cache, seed=seed)
    result.seconds, result.cpu_seconds = time.monotonic() - began, time.process_time() - cpu_began
    return result


def _describe_source(bilm, model, options, weights) -> str:
    if bilm is not None:
        return f"a {type(bilm).__name__} given in Python"
    return model_name(model, options, weights)


def _provenance(command, bilm_given, digest, model, options, weights, files) -> Dict[str, Any]:
    """The results record: the model as loaded from its files (or the digest of one given in Python)
    and every task's train and eval files."""
    read = [Path(path) for pair in files.values() for path in pair if path is not None]
    # a WiC split's labels lie beside its data, in NAME.gold.txt
    gold = [p.with_name(p.name.replace(".data.txt", ".gold.txt")) for p in read if p.name.endswith(".data.txt")]
    data = data_record(read + [p for p in gold if p.is_file()])
    if not bilm_given:
        return provenance(command, model=model_record(model, options=options, weights=weights), data=data)
    if len(digest) == 64:
        given = {"name": "a BiLM given in Python", "version": "unversioned", "weights": "(in memory, as safetensors)",
                 "weights_sha256": digest}
        return provenance(command, model=given, data=data)
    return provenance(command, model=None, model_note=f"features given in Python, not a biLM ({digest})", data=data)


def _model_record(bilm: Embedder, source: str, digest: str) -> Dict[str, Any]:
    record: Dict[str, Any] = {"source": source, "weights_sha256": digest}
    if isinstance(bilm, BiLM):
        record["options"] = bilm.config.to_options()
    return record
