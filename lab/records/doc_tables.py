"""Tables of the user docs other than the README, the model card and docs/speed.md, written from
their records by ``python -m lab.records.numbers --document docs/NAME.md``: the sense neighbours of
the shipped model (``neighbors``), the long soaks of docs/reliability.md (``soak``), the
parity checks of docs/formats.md (``parity``), the "bank" pairs of docs/probes.md (``bank-pairs``), any downstream report's
runs (``report:PATH``), and the semantic-change benchmark's scores (``change``, ``induction``)."""
from pathlib import Path
from typing import Any, Dict, List

from .reading import read_record
from .releases import RELEASE

NEIGHBORS = f"{RELEASE}/neighbors"
QUERIES = ("play-sport", "play-theatre", "bank-money", "bank-river")


def _query(data: Dict[str, Any]) -> str:
    words: List[str] = data["query"]
    return " ".join(f"*{w}*" if w == data["word"] else w for w in words).replace(" .", ".")


def neighbors_table(root: Path) -> str:
    """RETURNS (str): each query's nearest uses of its word (cosine on the mean of the layers) and
    its nearest words by layer 0 alone, from the shipped model's ``neighbors`` records."""
    lines = ["| query | ELMo's nearest uses (cosine) | layer 0 alone (static, cosine) | record |", "|---|---|---|---|"]
    for name in QUERIES:
        path = f"{NEIGHBORS}/{name}.json"
        data = read_record(root, path)
        uses = "; ".join(f"{n['score']:.3f} \"{_cut(n['sentence'], data['word'])}\"" for n in data["neighbors"])
        static = ", ".join(f"{n['word']} {n['score']:.3f}" for n in data["static_neighbors"])
        lines.append(f"| {_query(data)} | {uses} | {static} | [{name}.json](../{path}) |")
    return "\n".join(lines) + "\n"


def _cut(sentence: str, word: str, width: int = 8) -> str:
    """RETURNS (str): the words around the first use of ``word``, the word in italics."""
    words = sentence.split()
    at = words.index(word) if word in words else 0
    start, end = max(0, at - width), min(len(words), at + width + 1)
    shown = " ".join(f"*{w}*" if i == at else w for i, w in enumerate(words[start:end], start))
    return ("..." if start else "") + shown + ("..." if end < len(words) else "")


SOAKS = (("frozen-output cache off", "results/reliability/soak.json"),
         ("frozen-output cache capped at 16 MB", "results/reliability/soak-frozen-cache-16mb.json"))


def soak_table(root: Path) -> str:
    """RETURNS (str): each long soak's RSS after the warm-up and since, and what it leaked
    (``lab/reliability/soak_long.py`` records)."""
    lines = ["| run | RSS after the warm-up | last sample | largest | growth to the last sample | intervals rising / flat / falling "
             "| live torch tensors (after warm-up / end) | Docs holding torch objects |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for what, path in SOAKS:
        d = read_record(root, path)
        lines.append(f"| {what}, {d['docs']:,} Docs (warm-up {d['warmup_docs']:,}) ([{Path(path).name}](../{path})) | "
                     f"{d['rss_mb_after_warmup']:.1f} MB | {d['rss_mb_final']:.1f} MB | {d['rss_mb_max_after_warmup']:.1f} MB | "
                     f"{d['growth_pct']:+.2f}% | {d['intervals_rising']} / {d['intervals_flat']} / {d['intervals_falling']} | "
                     f"{d['torch_tensors_after_warmup']} / {d['torch_tensors_final']} | {d['docs_with_torch_objects']} |")
    return "\n".join(lines) + "\n"


def parity_table(root: Path) -> str:
    """RETURNS (str): every check of ``results/parity.json`` against a reference implementation and
    its largest absolute difference."""
    checks = read_record(root, "results/parity.json")["checks"]
    lines = ["| reference | check | largest absolute difference |", "|---|---|---:|"]
    for reference, found in checks.items():
        for i, (check, result) in enumerate(found.items()):
            lines.append(f"| {reference if i == 0 else ''} | {check.replace('<', '`<').replace('>', '>`')} | "
                         f"{result['max_abs_diff']:.1e} |".replace("e-0", "e-"))
    return "\n".join(lines) + "\n"


def bank_pairs_table(root: Path) -> str:
    """RETURNS (str): the cosine of each pair of the README's "bank" sentences, with the mean of the
    layers and with the shipped model's default vectors (``sense_example`` of its sense-vectors record)."""
    example = read_record(root, f"{RELEASE}/sense-vectors.json")["sense_example"]
    texts = [s["text"] for s in example["sentences"]]
    lines = ['| pair of "bank"s | before (`vectors = "plain"`) | the default |', "|---|---:|---:|"]
    for before, after in zip(example["before"]["pairs"], example["after"]["pairs"]):
        same = " (same sense)" if before["same_sense"] else ""
        lines.append(f"| *{texts[before['first']]}* / *{texts[before['second']]}*{same} | {before['similarity']:.4f} | {after['similarity']:.4f} |")
    return "\n".join(lines) + "\n"


def _mean(runs: List[Dict[str, Any]], key: str) -> float:
    """RETURNS (float): the mean of a score over runs, in points."""
    return 100 * sum(r[key] for r in runs) / len(runs)


def report_table(root: Path, path: str) -> str:
    """RETURNS (str): a downstream report's runs (``lab.campaign.report_results --records``) by task
    and share of train: the mean test score without and with ELMo, their difference and the dev
    scores of model-best; ``<!-- numbers:report:PATH -->`` names the record."""
    runs = read_record(root, path)["runs"]
    lines = ["| task | train % | train docs | without ELMo | with ELMo | ELMo - plain | dev without / with | runs without / with |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    cells = list(dict.fromkeys((r["task"], r["fraction_pct"]) for r in runs))
    for task, pct in cells:
        found = [r for r in runs if (r["task"], r["fraction_pct"]) == (task, pct)]
        plain = [r for r in found if r["setting"] == "plain"]
        elmo = [r for r in found if r["setting"] != "plain"]
        if not plain or not elmo:
            continue
        dev = " / ".join(f"{_mean(rs, 'dev_score'):.2f}" if all("dev_score" in r for r in rs) else "not recorded" for rs in (plain, elmo))
        lines.append(f"| {task} | {pct} | {found[0]['train_docs']:,} | {_mean(plain, 'score'):.2f} | {_mean(elmo, 'score'):.2f} | "
                     f"{_mean(elmo, 'score') - _mean(plain, 'score'):+.2f} | {dev} | {len(plain)} / {len(elmo)} |")
    return "\n".join(lines) + f"\n\n([{Path(path).name}](../{path}))\n"


CHANGE = f"{RELEASE}/semantic-change.json"


def _spread(cell: Dict[str, Any]) -> str:
    return "n/a" if cell["mean"] is None else f"{cell['mean']:.2f} ± {cell['sd']:.2f}"


def change_table(root: Path) -> str:
    """RETURNS (str): each change score on each layer against the gold ranking (Spearman, mean ± sd
    over the seeds), for the shipped model and random weights of its shape, by kind of target."""
    spearman = read_record(root, CHANGE)["spearman"]
    groups = ("sense shift", "pseudo-word")
    lines = ["| score@layer | " + " | ".join(f"{m}: {g}" for g in groups for m in ("shipped", "random")) + " |",
             "|---|" + "---|" * 4]
    for score in spearman["shipped"]:
        cells = [_spread(spearman[m][score][g]) for g in groups for m in ("shipped", "random")]
        lines.append(f"| {score} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def induction_table(root: Path) -> str:
    """RETURNS (str): sense induction against the Senseval senses (adjusted Rand index, mean ± sd over
    the seeds) by model, method and word."""
    ari = read_record(root, CHANGE)["ari"]
    words = list(ari["shipped"]["substitutes"])
    lines = ["| model | method | " + " | ".join(w.split("-")[0] for w in words) + " |", "|---|---|" + "---|" * len(words)]
    for model, methods in ari.items():
        for method, found in methods.items():
            lines.append(f"| {model} | {method} | " + " | ".join(_spread(found[w]) for w in words) + " |")
    return "\n".join(lines) + "\n"


TABLES = {"change": change_table, "induction": induction_table, "report": report_table, "bank-pairs": bank_pairs_table, "neighbors": neighbors_table, "soak": soak_table, "parity": parity_table}
