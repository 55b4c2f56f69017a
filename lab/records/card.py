"""The shipped model card's tables, written from their records by ``python -m lab.records.numbers
--document spacy_elmo/models/en_small/MODEL_CARD.md`` (blocks ``card-perplexity``, ``card-probes``,
``card-downstream``, ``card-training``): the held-out perplexity, the layer probes and the downstream
gains of each release, and each training stage's report."""
import statistics
from pathlib import Path
from typing import Any, Dict, List, Sequence, Tuple

from .reading import read_record
from .releases import CANDIDATE, PREVIOUS, SHIPPED

# each release's evaluation folder (the continued/pretrained and the fine-tuned model's eval-*.json)
EVALUATED: Sequence[Tuple[str, str]] = (
    (SHIPPED, CANDIDATE), ("0.9.0", "results/campaign-third/after-part4"), ("0.8.0", "results/campaign-third"),
    ("0.7.0", "results/campaign-wide-replay"), ("0.6.0", "results/campaign/0.6.0"), ("0.5.0", "results/campaign/0.5.0"),
    ("0.4.0", "results/campaign/0.4.0"), ("0.3.0", "results/campaign/0.3.0"), ("0.2.0", "results/campaign/0.2.0"),
)
TEXTS: Sequence[Tuple[str, str]] = (
    ("UD EWT test raw text (held out)", "eval_ewt-test"), ("WikiText-2 test (held out)", "eval_wikitext2-test"),
    ("UD EWT dev raw text (chose the fine-tuned model)", "domain_ewt-dev"),
    ("campaign pretraining dev (chose 0.6.0's pretrained model)", "pretrain_dev"),
)
PROBED = (SHIPPED, PREVIOUS)
# each release's downstream reports (1% and 10% of train): the gains of the newest model of each
DOWNSTREAM: Sequence[Tuple[str, str]] = (
    (SHIPPED, CANDIDATE), ("0.9.0", "results/campaign-third/after-part4"), ("0.8.0", "results/campaign-third"),
    ("0.7.0", "results/campaign-wide-replay"),
)
# the training stages whose run wrote a report: (stage, report)
STAGES: Sequence[Tuple[str, str]] = (
    ("fine-tune (0.6.0)", "results/campaign/finetune-ewt/finetune-report.json"),
    ("continue, stretch 1 (wide corpus)", "results/campaign-wide/pretrain/finetune-report.json"),
    ("continue, stretch 2 (replay mix)", "results/campaign-wide-replay/pretrain/finetune-report.json"),
    ("fine-tune (0.7.0)", "results/campaign-wide-replay/finetune-ewt/finetune-report.json"),
    ("continue, stretch 3, part 1 (rebuilt mix)", "results/campaign-third/pretrain/part1-finetune-report.json"),
    ("continue, stretch 3, part 2", "results/campaign-third/pretrain/part2-finetune-report.json"),
    ("continue, stretch 3, part 3", "results/campaign-third/pretrain/part3-finetune-report.json"),
    ("fine-tune (0.8.0)", "results/campaign-third/finetune-ewt/finetune-report.json"),
    ("continue, stretch 3, part 4", "results/campaign-third/pretrain/part4-finetune-report.json"),
    ("fine-tune (0.9.0)", "results/campaign-third/after-part4/finetune-ewt/finetune-report.json"),
    ("continue, stretch 4, part 1 (bf16)", "results/campaign-fourth/stretch/part1-finetune-report.json"),
    (f"fine-tune ({SHIPPED})", f"{CANDIDATE}/finetune-ewt/finetune-report.json"),
)


def perplexity_table(root: Path) -> str:
    """RETURNS (str): each release's perplexity on each held-out text, before and after its fine-tuning."""
    head = "| text | OOV | " + " | ".join(f"{v} before / after fine-tuning" for v, _ in EVALUATED) + " |"
    lines = [head, "|---|---:|" + "---:|" * len(EVALUATED)]
    for label, text in TEXTS:
        newest = read_record(root, f"{EVALUATED[0][1]}/eval-finetune-ewt_model-best-{text}.json")
        cells = []
        for _, folder in EVALUATED:
            before, after = (read_record(root, f"{folder}/eval-{stage}_model-best-{text}.json")["ppl"] for stage in ("pretrain", "finetune-ewt"))
            cells.append(f"{before:.1f} / {after:.1f}")
        lines.append(f"| {label} | {100 * newest['oov_rate']:.1f}% | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def probes_table(root: Path) -> str:
    """RETURNS (str): the layer probes of the shipped release and of earlier ones."""
    scores: Dict[str, Dict[str, Dict[str, float]]] = {}
    for version in PROBED:
        tasks = {t["task"]: t["scores"] for t in read_record(root, f"results/en_small/{version}/probe/probe.json")["tasks"]}
        tasks["wic dev"] = next(t["scores"] for t in read_record(root, f"results/en_small/{version}/probe-wic-dev/probe.json")["tasks"])
        scores[version] = tasks
    columns = [(v, task) for v in PROBED for task in ("upos", "wsd", "wic", "wic dev")]
    names = {"upos": "UPOS", "wsd": "WSD", "wic": "WiC test", "wic dev": "WiC dev"}
    lines = ["| representation | " + " | ".join(f"{v}: {names[t]}" for v, t in columns) + " |",
             "|---|" + "---:|" * len(columns)]
    keys = list(dict.fromkeys(k for v in PROBED for t in scores[v].values() for k in t))
    for key in keys:
        cells = [f"{scores[v][t][key]:.1f}" if key in scores[v][t] else "" for v, t in columns]
        lines.append(f"| {NAMES.get(key, key)} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


NAMES = {"layer 0": "layer 0 (char-CNN, no context)", "layer 1": "layer 1 (LSTM 1)", "layer 2": "layer 2 (LSTM 2)",
         "mean": "mean of layers", "scalar mix": "scalar mix (learned)", "majority": "majority class"}


def _runs(data: Dict[str, Any], task: str, pct: int, *, elmo: bool) -> List[float]:
    """The test scores (points) of a downstream report's runs; with ELMo only its newest model's."""
    runs = [r for r in data["runs"] if r["task"] == task and r["fraction_pct"] == pct and (r["setting"] != "plain") == elmo]
    if elmo:
        newest = runs[-1]["provenance"]["model"]["weights_sha256"]
        runs = [r for r in runs if r["provenance"]["model"]["weights_sha256"] == newest]
    return [100 * r["score"] for r in runs]


def downstream_table(root: Path) -> str:
    """RETURNS (str): the shipped release's downstream runs with and without ELMo, its gain over the
    mean of the plain runs, and earlier releases' gains the same way."""
    lines = ["| task | train | without ELMo: mean (runs) | with ELMo: mean (seeds) | gain | "
             + " | ".join(f"{v}'s gain" for v, _ in DOWNSTREAM[1:]) + " |", "|---|---|---:|---:|---:|" + "---:|" * (len(DOWNSTREAM) - 1)]
    for task, label in (("upos", "UPOS accuracy"), ("ner", "NER F1")):
        for pct in (1, 10):
            reports = [read_record(root, f"{folder}/downstream-{pct}pct-metrics.json") for _, folder in DOWNSTREAM]
            plain, elmo = _runs(reports[0], task, pct, elmo=False), _runs(reports[0], task, pct, elmo=True)
            gains = [statistics.mean(_runs(r, task, pct, elmo=True)) - statistics.mean(_runs(r, task, pct, elmo=False)) for r in reports]
            listed = [f"{statistics.mean(s):.2f} ({', '.join(f'{x:.2f}' for x in s)})" for s in (plain, elmo)]
            lines.append(f"| {label} | {pct}% | {listed[0]} | {listed[1]} | " + " | ".join(f"{g:+.2f}" for g in gains) + " |")
    return "\n".join(lines) + "\n"


def training_table(root: Path) -> str:
    """RETURNS (str): each training stage that wrote a report: its steps, tokens, time, rate and the
    held-out perplexity of the model it kept."""
    lines = ["| stage | last step | tokens | minutes | tokens/s | dev perplexity of the kept model (step) | record |",
             "|---|---:|---:|---:|---:|---:|---|"]
    for stage, path in STAGES:
        report = read_record(root, path)
        best = report["after_best"]
        lines.append(f"| {stage} | {report['steps']:,} | {report['tokens']:,} | "
                     f"{report['seconds'] / 60:.0f} | {report['tokens'] / report['seconds']:,.0f} | "
                     f"{best['ppl']:.1f} ({best['step']:,}) | [{Path(path).name}](../../../{path}) |")
    return "\n".join(lines) + "\n"


TABLES = {"card-perplexity": perplexity_table, "card-probes": probes_table, "card-downstream": downstream_table,
          "card-training": training_table}
