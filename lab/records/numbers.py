"""The generated tables of the README, the model card and the docs, written from the records they
cite: ``python -m lab.records.numbers`` rewrites each generated block of README.md (``--document``
another document), ``--check`` exits 1 where the document differs from what the records give
(``tests/lab/records/test_numbers.py`` runs it for the README, ``test_binding.py`` for every bound
document).

A generated block sits between ``<!-- numbers:NAME -->`` and ``<!-- /numbers:NAME -->`` (or
``<!-- numbers:NAME:PATH -->`` for a table of the record at PATH); ``BLOCKS`` maps each NAME to the
function that writes it from the records (the README's here, the model card's in ``card``,
docs/speed.md's in ``speed_guide``, the other docs' in ``doc_tables``). Each figure of the headline
is read from the record its row links, and the row names the model the record says made it
(version and the first 12 hex digits of its weights' SHA-256), or what the record says stood in for
one; a speed row gives its median round and what the run needed.
"""
import argparse
import re
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence

from .card import TABLES as CARD
from .doc_tables import TABLES as DOCS
from .reading import read_record
from .releases import CANDIDATE, RELEASE, SHIPPED
from .speed_guide import TABLES as GUIDE
from .speed_guide import cpu_label, needs_label, repeats

ROOT = Path(__file__).resolve().parents[2]
BENCH = "results/bench"
# the shipped release the README describes, and the run that made it
CAMPAIGN = CANDIDATE
_BLOCK = re.compile(r"(<!-- numbers:(?P<name>[\w-]+)(?::(?P<arg>[\w./-]+))? -->\n)(?P<body>.*?)(<!-- /numbers:(?P=name) -->)", re.S)


@dataclass
class Row:
    """One line of the headline table.

    what (str): what was measured. record (str): the JSON record, relative to the checkout.
    figure (Callable[[Dict[str, Any]], str]): the figure, written from the record's JSON.
    model (Optional[str]): where the record names no model, what the run ran (its note is long).
    runs (Optional[Callable[[Dict[str, Any]], Dict[str, Any]]]): for a record that gathers runs, the
        provenance of the run whose model the figure is about (else the record's own).
    """

    what: str
    record: str
    figure: Callable[[Dict[str, Any]], str]
    model: Optional[str] = None
    runs: Optional[Callable[[Dict[str, Any]], Dict[str, Any]]] = None


def _scores(data: Dict[str, Any], task: str, pct: int, *, elmo: bool) -> List[float]:
    """The test scores (in points) of a downstream report's runs of one task, fraction and setting;
    with ELMo only the runs of the report's last model (the newest it compares)."""
    runs = [r for r in data["runs"] if r["task"] == task and r["fraction_pct"] == pct]
    runs = [r for r in runs if (r["setting"] != "plain") == elmo]
    if elmo:
        newest = runs[-1]["provenance"]["model"]["weights_sha256"]
        runs = [r for r in runs if r["provenance"]["model"]["weights_sha256"] == newest]
    return [100 * r["score"] for r in runs]


def _newest(data: Dict[str, Any]) -> Dict[str, Any]:
    """RETURNS (Dict[str, Any]): the provenance of a downstream report's last run with ELMo."""
    return [r for r in data["runs"] if r["setting"] != "plain"][-1]["provenance"]


def _gain(data: Dict[str, Any], task: str, pct: int) -> str:
    elmo, plain = _scores(data, task, pct, elmo=True), _scores(data, task, pct, elmo=False)
    seeds = f"mean of {len(elmo)} seeds" if len(elmo) > 1 else "1 run"
    return f"{statistics.mean(elmo):.2f} ({seeds}) against {statistics.mean(plain):.2f} ({len(plain)} plain run{'s' * (len(plain) > 1)})"


def _probe(data: Dict[str, Any], task: str, key: str) -> float:
    return next(t for t in data["tasks"] if t["task"] == task)["scores"][key]


HEADLINES: Sequence[Row] = (
    Row("Parity: largest difference from AllenNLP's, bilm-tf's and ELMoForManyLangs' outputs (contract: 1e-5)",
        "results/parity.json", lambda d: f"{d['max_abs_diff']:.1e}".replace("e-0", "e-"), "their test models"),
    Row("Perplexity, UD EWT test text", f"{CAMPAIGN}/eval-finetune-ewt_model-best-eval_ewt-test.json",
        lambda d: f"{d['ppl']:.1f}"),
    Row("Perplexity, WikiText-2 test text", f"{CAMPAIGN}/eval-finetune-ewt_model-best-eval_wikitext2-test.json",
        lambda d: f"{d['ppl']:.1f}"),
    Row("UPOS probe (accuracy): LSTM layer 1 against the char-CNN layer", f"{RELEASE}/probe/probe.json",
        lambda d: f"{_probe(d, 'upos', 'layer 1'):.1f} against {_probe(d, 'upos', 'layer 0'):.1f}"),
    Row("WiC dev (accuracy), mean of the layers", f"{RELEASE}/probe-wic-dev/probe.json",
        lambda d: f"{_probe(d, 'wic', 'mean'):.1f}"),
    Row("UD EWT UPOS (accuracy), 1% of train, 2,000-step cap", f"{CAMPAIGN}/downstream-1pct-metrics.json",
        lambda d: _gain(d, "upos", 1), runs=_newest),
    Row("CoNLL-2003 NER (F1), 1% of train, 2,000-step cap", f"{CAMPAIGN}/downstream-1pct-metrics.json",
        lambda d: _gain(d, "ner", 1), runs=_newest),
    Row("UD EWT UPOS (accuracy), 10% of train", f"{CAMPAIGN}/downstream-10pct-metrics.json",
        lambda d: _gain(d, "upos", 10), runs=_newest),
    Row("CoNLL-2003 NER (F1), 10% of train", f"{CAMPAIGN}/downstream-10pct-metrics.json",
        lambda d: _gain(d, "ner", 10), runs=_newest),
    Row("Fuzzed Docs of messy Unicode: errors", "results/reliability/fuzz.json",
        lambda d: f"{d['errors']} in {d['docs']:,} Docs", "a tiny test model"),
    Row("RSS growth over Docs after warm-up, frozen-output cache off", "results/reliability/soak.json",
        lambda d: f"{d['growth_pct']:.2f}% over {d['docs']:,} Docs", "a tiny test model"),
)


def model_label(provenance: Dict[str, Any], fallback: Optional[str]) -> str:
    """RETURNS (str): the models a record names, each as ``NAME VERSION (SHA-256 prefix)`` (a training
    output by the shipped model it became, where ``SHIPPED`` knows its digest), or ``fallback``."""
    if fallback is not None:
        return fallback
    models = provenance.get("model")
    models = [m for m in (models if isinstance(models, list) else [models]) if isinstance(m, dict)]
    labels = []
    for model in models:
        digest = model.get("weights_sha256") or ""
        name = f"en_small {SHIPPED[digest]}" if digest in SHIPPED else f"{model['name']} {model.get('version')}"
        labels.append(f"{name} (`{digest[:12]}`)")
    return "; ".join(labels) or str(provenance.get("model_note"))


def machine_label(provenance: Dict[str, Any]) -> str:
    """RETURNS (str): the CPU and threads a record names, and its date."""
    threads = provenance.get("torch_threads")
    return f"{provenance.get('cpu')}, {threads} thread{'s' * (threads != 1)}, {str(provenance.get('date'))[:10]}"


def headline_table(root: Path) -> str:
    """RETURNS (str): the headline table, each figure read from the record its row links."""
    lines = ["| measured | figure | model | machine, date | record |", "|---|---|---|---|---|"]
    for row in HEADLINES:
        data = read_record(root, row.record)
        record = data["provenance"]
        model = model_label(row.runs(data) if row.runs else record, row.model)
        link = f"[{Path(row.record).name}]({row.record})"
        lines.append(f"| {row.what} | {row.figure(data)} | {model} | {machine_label(record)} | {link} |")
    return "\n".join(lines) + "\n"


@dataclass
class SpeedRow:
    """One line of the speed table: a figure at the median round, with what the run needed.

    what (str): what was measured. record (str): the JSON record, relative to the checkout.
    figure (Callable[[Dict[str, Any]], str]): the figure, written from the record's JSON.
    isa (str): the instructions the mode needs (its kernel's). model (Optional[str]): what stood in
    for a model, where the timed run ran none of those its record names.
    """

    what: str
    record: str
    figure: Callable[[Dict[str, Any]], str]
    isa: str
    model: Optional[str] = None


def _rate(data: Dict[str, Any], shape: str, part: str, mode: str) -> float:
    """RETURNS (float): tokens/s of a bench_bilm mode at its median round."""
    timed = data["shapes"][shape][part]
    return timed["tokens"] / timed["modes"][mode]["median_seconds"]


def _median_batch(data: Dict[str, Any], shape: str, part: str = "batch", mode: str = "ours_opt", against: str = "baseline") -> str:
    rounds = repeats(data)
    times = _rate(data, shape, part, mode) / _rate(data, shape, part, against)
    what = "the original algorithm" if against == "baseline" else "fp32"
    return f"{_rate(data, shape, part, mode):,.1f} tokens/s, {times:.2f}x {what} (medians of {rounds} rounds)"


def _median_sentence(data: Dict[str, Any], mode: str) -> str:
    """One sentence at a time (bench_one_sentence): tokens/s and x fp32 at the median round, with
    the range over the rounds."""
    timed = data["modes"][mode]
    rates = sorted(data["tokens"] / s for s in timed["round_seconds"])
    times = timed["x_fp32_per_round"]
    return (f"{data['tokens'] / timed['median_seconds']:,.1f} tokens/s ({rates[0]:,.1f}-{rates[-1]:,.1f}), "
            f"{timed['x_fp32_median']:.2f}x fp32 ({min(times):.2f}-{max(times):.2f}x), median of {len(times)} rounds")


def _against_peer(data: Dict[str, Any], workload: str, mode: str) -> str:
    """bench_tf_peer: tokens/s and the ratio to TensorFlow's fp32 at the median round, with the range."""
    timed = data["results"][workload][mode]
    return (f"{timed['tokens_per_s']:,.1f} tokens/s, {timed['vs_tensorflow']:.2f}x bilm-tf's graph on TensorFlow "
            f"({timed['vs_tensorflow_min']:.2f}-{timed['vs_tensorflow_max']:.2f}x), median of {timed['rounds']} rounds")


def _training_step(data: Dict[str, Any], precision: str, loop: str = "steps") -> str:
    """bench_pretrain_step: tokens/s and the ratio to fp32 at the median round, with the range."""
    row = next(r for r in data["rows"] if r["precision"] == precision and r["loop"] == loop)
    return (f"{row['tokens_per_s_median']:,.1f} tokens/s, {row['x_fp32_median']:.2f}x fp32 "
            f"({row['x_fp32_min']:.2f}-{row['x_fp32_max']:.2f}x), {row['batches']} batches of {row['batch_tokens']:,} tokens in all, "
            f"median of {data['rounds']} rounds")


RANDOM = "random weights of `original`'s shape"
TF_PEER = f"{BENCH}/amd-f25-m17/tf-peer-rounds.json"
TF_PEER_SUMMED = f"{BENCH}/amd-f25-m17/tf-peer-summed-cells.json"
TF_PEER_BEFORE = f"{BENCH}/amd-f25-m17/tf-peer.json"
TF_PEER_INTEL = f"{BENCH}/intel-f6-m207/tf-peer-rounds.json"
# one current row per workload, precision and CPU, from runs on an idle machine; each names its CPU, whose
# ratios are its own (a Zen 5 gives other ratios against TensorFlow than this Zen 4, an Intel Xeon others again)
SPEED: Sequence[SpeedRow] = (
    SpeedRow("batch of 64 sentences, fp32, `original`'s shape, beside TensorFlow in the same run", TF_PEER,
             lambda d: _against_peer(d, "batch", "ours fp32"), "AVX-512", RANDOM),
    SpeedRow("one sentence at a time, fp32, `original`'s shape, beside TensorFlow in the same run", TF_PEER,
             lambda d: _against_peer(d, "one sentence", "ours fp32"), "AVX-512", RANDOM),
    SpeedRow("batch of 64 sentences, `precision=\"bf16\"`, `original`'s shape, beside TensorFlow's fp32 in the same run", TF_PEER,
             lambda d: _against_peer(d, "batch", "ours bf16"), "AVX512-BF16", RANDOM),
    SpeedRow("batch of 64 sentences, `precision=\"int8\"`, `original`'s shape, beside TensorFlow's fp32 in the same run", TF_PEER,
             lambda d: _against_peer(d, "batch", "ours int8"), "AVX512-VNNI", RANDOM),
    SpeedRow("one sentence at a time, `precision=\"int8\"`, `original`'s shape, beside TensorFlow's fp32 in the same run", TF_PEER,
             lambda d: _against_peer(d, "one sentence", "ours int8"), "AVX512-VNNI", RANDOM),
    SpeedRow("batch of 64 sentences, fp32, `original`'s shape, beside TensorFlow in the same run", TF_PEER_INTEL,
             lambda d: _against_peer(d, "batch", "ours fp32"), "AVX-512", RANDOM),
    SpeedRow("one sentence at a time, fp32, `original`'s shape, beside TensorFlow in the same run", TF_PEER_INTEL,
             lambda d: _against_peer(d, "one sentence", "ours fp32"), "AVX-512", RANDOM),
    SpeedRow("batch of 64 sentences, `precision=\"bf16\"`, `original`'s shape, beside TensorFlow's fp32 in the same run "
             "(slower than fp32 on this CPU)", TF_PEER_INTEL, lambda d: _against_peer(d, "batch", "ours bf16"), "AVX512-BF16", RANDOM),
    SpeedRow("batch of 64 sentences, `precision=\"int8\"`, `original`'s shape, beside TensorFlow's fp32 in the same run", TF_PEER_INTEL,
             lambda d: _against_peer(d, "batch", "ours int8"), "AVX512-VNNI", RANDOM),
    SpeedRow(f"batch of 64 sentences, fp32, the shipped en_small {SHIPPED}", f"{RELEASE}/bilm-shipped.json",
             lambda d: _median_batch(d, "shipped"), "AVX-512"),
    SpeedRow(f"batch of 64 sentences, `precision=\"int8\"`, the shipped en_small {SHIPPED}", f"{RELEASE}/bilm-shipped.json",
             lambda d: _median_batch(d, "shipped", mode="int8", against="ours_opt"), "AVX512-VNNI"),
    SpeedRow("pretraining step (biLM, softmax, backward, Adam), `[training] autocast = \"bf16\"`, `original`'s shape",
             f"{BENCH}/amd-f25-m17/pretrain-step-full-ab-train-cells.json", lambda d: _training_step(d, "bf16"), "AVX512-BF16",
             RANDOM),
)
# rows the README gave before: runs on a busy machine, or a workload and precision a newer idle run measures
SPEED_HISTORY: Sequence[SpeedRow] = (
    SpeedRow("batch of 64 sentences, fp32, `original`'s shape, beside TensorFlow in the same run", TF_PEER_SUMMED,
             lambda d: _against_peer(d, "batch", "ours fp32"), "AVX-512", RANDOM),
    SpeedRow("one sentence at a time, fp32, `original`'s shape, beside TensorFlow in the same run", TF_PEER_SUMMED,
             lambda d: _against_peer(d, "one sentence", "ours fp32"), "AVX-512", RANDOM),
    SpeedRow("batch of 64 sentences, `precision=\"bf16\"`, `original`'s shape, beside TensorFlow's fp32 in the same run",
             TF_PEER_SUMMED, lambda d: _against_peer(d, "batch", "ours bf16"), "AVX512-BF16", RANDOM),
    SpeedRow("one sentence at a time, `precision=\"int8\"`, `original`'s shape, beside TensorFlow's fp32 in the same run, "
             "before int8's timestep ran its product and cells in one call", TF_PEER_SUMMED,
             lambda d: _against_peer(d, "one sentence", "ours int8"), "AVX512-VNNI", RANDOM),
    SpeedRow("batch of 64 sentences, fp32, `original`'s shape, beside TensorFlow in the same run", TF_PEER_BEFORE,
             lambda d: _against_peer(d, "batch", "ours fp32"), "AVX-512", RANDOM),
    SpeedRow("one sentence at a time, fp32, `original`'s shape, beside TensorFlow in the same run", TF_PEER_BEFORE,
             lambda d: _against_peer(d, "one sentence", "ours fp32"), "AVX-512", RANDOM),
    SpeedRow("batch of 64 sentences, `precision=\"bf16\"`, `original`'s shape, beside TensorFlow's fp32 in the same run, "
             "before its cells ran in the kernel library", TF_PEER_BEFORE, lambda d: _against_peer(d, "batch", "ours bf16"),
             "AVX512-BF16", RANDOM),
    SpeedRow("one sentence at a time, `precision=\"int8\"`, `original`'s shape, beside TensorFlow's fp32 in the same run, "
             "before its cells ran in the kernel library", TF_PEER_BEFORE, lambda d: _against_peer(d, "one sentence", "ours int8"),
             "AVX512-VNNI", RANDOM),
    SpeedRow("pretraining step (biLM, softmax, backward, Adam), `[training] autocast = \"bf16\"`, `original`'s shape, "
             "the cells in torch operations", f"{BENCH}/amd-f25-m17/pretrain-step-full.json", lambda d: _training_step(d, "bf16"),
             "AVX512-BF16", RANDOM),
    SpeedRow("batch of 64 sentences, fp32, `original`'s shape", f"{BENCH}/amd-f25-m17/bilm.json",
             lambda d: _median_batch(d, "full"), "AVX-512", RANDOM),
    SpeedRow("one sentence at a time, fp32, `original`'s shape", f"{BENCH}/amd-f25-m17/bilm.json",
             lambda d: _median_batch(d, "full", "single"), "AVX-512", RANDOM),
    SpeedRow("one sentence at a time, `precision=\"int8\"`, `original`'s shape", f"{BENCH}/amd-f25-m17/one-sentence-one-thread.json",
             lambda d: _median_sentence(d, "int8"), "AVX512-VNNI", RANDOM),
    SpeedRow("batch of 64 sentences, `precision=\"bf16\"`, `original`'s shape", f"{BENCH}/intel-f6-model-unrecorded/bilm.json",
             lambda d: _median_batch(d, "full", mode="bf16", against="ours_opt"), "AMX and AVX512-BF16", RANDOM),
    SpeedRow("batch of 64 sentences, fp32, the shipped en_small 0.9.0", "results/en_small/0.9.0/bilm-shipped.json",
             lambda d: _median_batch(d, "shipped"), "AVX-512"),
    SpeedRow("batch of 64 sentences, `precision=\"int8\"`, the shipped en_small 0.9.0, before int8's row products split "
             "between threads", "results/en_small/0.9.0/bilm-shipped.json",
             lambda d: _median_batch(d, "shipped", mode="int8", against="ours_opt"), "AVX512-VNNI"),
)


def speed_table(root: Path, rows: Sequence[SpeedRow] = SPEED, *, link_prefix: str = "") -> str:
    """RETURNS (str): the speed table: each figure at its record's median round, the CPU it ran on,
    what the run needed. rows: the rows (the README's, ``SPEED``); link_prefix: the way from the
    document's folder to the checkout's (``../`` from docs/)."""
    lines = ["| measured | figure (median round) | CPU | needed | model | date | record |", "|---|---|---|---|---|---|---|"]
    for row in rows:
        data = read_record(root, row.record)
        model = model_label(data["provenance"], row.model)
        link = f"[{Path(row.record).name}]({link_prefix}{row.record})"
        lines.append(f"| {row.what} | {row.figure(data)} | {cpu_label(row.record, data)} | {needs_label(data, row.isa)} | "
                     f"{model} | {str(data['provenance'].get('date'))[:10]} | {link} |")
    return "\n".join(lines) + "\n"


def speed_history_table(root: Path) -> str:
    """RETURNS (str): the rows the README's speed table gave before (``SPEED_HISTORY``), for docs/speed.md."""
    return speed_table(root, SPEED_HISTORY, link_prefix="../")


def probe_table(root: Path) -> str:
    """RETURNS (str): the shipped model's layer probes (``python -m spacy_elmo probe``), one row per
    representation."""
    data = read_record(root, f"{RELEASE}/probe/probe.json")
    tasks = data["tasks"]
    lines = ["| representation | " + " | ".join(f"{t['task']} ({t['metric']})" for t in tasks) + " |",
             "|---|" + "---:|" * len(tasks)]
    names = {"layer 0": "layer 0 (char-CNN, no context)", "layer 1": "layer 1 (LSTM 1)", "layer 2": "layer 2 (LSTM 2)",
             "mean": "mean of layers", "scalar mix": "scalar mix (learned)", "majority": "majority class"}
    keys = list(dict.fromkeys(k for t in tasks for k in t["scores"]))
    for key in keys:
        cells = [f"{t['scores'][key]:.1f}" if key in t["scores"] else "–" for t in tasks]
        lines.append(f"| {names.get(key, key)} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


BLOCKS: Dict[str, Callable[[Path], str]] = {"headline": headline_table, "probe": probe_table, "speed": speed_table,
                                             "speed-history": speed_history_table, **CARD, **GUIDE, **DOCS}
# the shipped model's releases by their weights' SHA-256 (``git log -- spacy_elmo/models/en_small``):
# a record of a training output names its folder, and these say which release it became
SHIPPED = {
    "1424414cd4b6b424b3f42bfd2cbb9bae8c299a633c5b3433c6b7f420b2fde1f0": "0.1.0",
    "3dd7706ef3444f701e7b25f5725ab361777d16d80f4ede970e9b478dd6eab10f": "0.2.0",
    "f0f8f7223e85e774a4147593d6953e563445defc80441ceff92b0b3ef00d6584": "0.3.0",
    "0bf1bd13d99a4f754b445ae49921f628f7ddad1aa0aa6fcbbb215b5344b990dc": "0.4.0",
    "9d6347bcd482778ecf4288007bc24bc1a56d45a2af80228e741f5ee8f316f75c": "0.5.0",
    "f5fce8a97b809785fea117830e134817bd59ad0d828578fc9e631021387f7578": "0.6.0",
    "5fcbc81bc4a4060a215d8a3457c486f193402b487846f0dd90e27c8b0836fb9f": "0.7.0",
    "ff1fe0ec2b69f6b1d88810f29412d20e6f57d79742cf6d0b9fe085c7672d2d6f": "0.8.0",
    "6a9c39362dd1b66c735c8f7f8ae4cb46263c7dd2fab4d32da70794ee3228cc7a": "0.9.0",
    "438a306f872f413f05855f58e99f98a88785668daf530bdea93559e342392c64": "0.10.0",
}


def render(text: str, root: Path) -> str:
    """``text`` with every generated block rewritten from the records.

    text (str): a document. root (Path): the checkout the records lie in.
    RETURNS (str): the document; unchanged where it has no block. Raises ValueError naming an
        unknown block.
    """
    def fill(match: "re.Match[str]") -> str:
        name = match.group("name")
        if name not in BLOCKS:
            raise ValueError(f"<!-- numbers:{name} -->: no such generated block (known: {', '.join(BLOCKS)})")
        arg = match.group("arg")
        return match.group(1) + (BLOCKS[name](root, arg) if arg else BLOCKS[name](root)) + match.group(5)

    return _BLOCK.sub(fill, text)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Rewrite (or with ``--check`` compare) a document's generated blocks.

    RETURNS (int): 0, or 1 where ``--check`` found the document differs from its records.
    """
    parser = argparse.ArgumentParser(prog="python -m lab.records.numbers", description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="only compare; exit 1 where the document differs")
    parser.add_argument("--document", type=Path, default=ROOT / "README.md", help="the document (README.md)")
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout the records lie in")
    args = parser.parse_args(argv)
    text = args.document.read_text(encoding="utf-8")
    if not _BLOCK.search(text):
        print(f"{args.document}: no <!-- numbers:NAME --> block", file=sys.stderr)
        return 1
    written = render(text, args.root)
    if written == text:
        print(f"{args.document}: every generated number matches its record")
        return 0
    if args.check:
        old, new = text.splitlines(), written.splitlines()
        for before, after in zip(old, new):
            if before != after:
                print(f"- {before}\n+ {after}", file=sys.stderr)
        print(f"{args.document}: differs from its records; run python -m lab.records.numbers", file=sys.stderr)
        return 1
    args.document.write_text(written, encoding="utf-8")
    print(f"{args.document}: generated blocks rewritten from their records")
    return 0


if __name__ == "__main__":
    sys.exit(main())
