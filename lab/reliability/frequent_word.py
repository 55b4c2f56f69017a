"""A word used hundreds of thousands of times through `neighbors`: its peak memory stays under a budget
whatever the number of uses, since the search keeps only the best ``--top`` of them.

    python -m lab.reliability.frequent_word --output results/reliability/frequent-word.json

Two corpora, each written to a temporary folder: ``one-line``, "the bank of the river " repeated
``--repeats`` times (250,000: 5.5 MB, one use of "bank" every five tokens) on one line without a
newline; and ``many-uses``, ``--uses`` (1,000,000) uses of "bank" on lines of 100 "the bank". Each runs
``neighbors --query "We sat on the river bank ." --word bank`` with ``--model`` (default: the shipped
biLM) in its own interpreter that reports its own peak resident memory (VmHWM) as it exits, as the
long-line run does (``lab.reliability.long_line.run_command``). A case passes when the command runs
(exit 0), its record says it saw every use and kept at most ``--top``, and its peak stays under
``--budget-mb`` (1 GB). The record gives each case's command, outcome, seconds, peak, uses seen and kept.
"""
import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from spacy_elmo.records.provenance import mark_start, model_record, provenance

from lab.reliability.long_line import finish_record, run_command

BUDGET_MB = 1024
QUERY, WORD = "We sat on the river bank .", "bank"
PHRASE = "the bank of the river "
USES_A_LINE = 100
TOP = 5


def write_corpora(work: Path, *, repeats: int, uses: int) -> Dict[str, Path]:
    """The two corpora (the module docstring), written under ``work``; RETURNS their files by case."""
    one_line = work / "one-line.txt"
    one_line.write_text(PHRASE * repeats, encoding="utf-8")
    many = work / "many-uses.txt"
    with many.open("w", encoding="utf-8") as out:
        full, rest = divmod(uses, USES_A_LINE)
        for count in [USES_A_LINE] * full + ([rest] if rest else []):
            out.write(" ".join(["the bank"] * count) + "\n")
    return {"one-line": one_line, "many-uses": many}


def neighbors_arguments(corpus: Path, found: Path, model: Optional[str]) -> List[str]:
    """``neighbors`` on ``corpus``, its JSON written to ``found`` (after ``python -m spacy_elmo``)."""
    given = ["--model", str(Path(model).resolve()) if Path(model).exists() else model] if model else []
    return ["neighbors", "--input", str(corpus), "--query", QUERY, "--word", WORD, "--top", str(TOP),
            "--output", str(found), *given]


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", type=Path, default=None, help="write the record here (JSON)")
    parser.add_argument("--model", default=None, help="the biLM (default: the shipped one)")
    parser.add_argument("--repeats", type=int, default=250_000, help=f"times {PHRASE.strip()!r} makes the one line")
    parser.add_argument("--uses", type=int, default=1_000_000, help="uses of the word in the many-uses corpus")
    parser.add_argument("--budget-mb", type=float, default=BUDGET_MB, help="peak resident memory a case may reach")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds a case may take")
    args = parser.parse_args(argv)
    mark_start()
    cases = {}
    with tempfile.TemporaryDirectory(prefix="frequent-word-") as folder:
        work = Path(folder)
        corpora = write_corpora(work, repeats=args.repeats, uses=args.uses)
        expected = {"one-line": args.repeats, "many-uses": args.uses}
        for name, corpus in corpora.items():
            found = work / f"{name}.json"
            arguments = neighbors_arguments(corpus, found, args.model)
            ran = run_command(arguments, work, timeout=args.timeout, budget_mb=args.budget_mb, expected=("ran",))
            result = json.loads(found.read_text(encoding="utf-8")) if found.is_file() else {}
            seen, kept = result.get("uses_seen"), result.get("uses_kept")
            cases[name] = {
                "command": "python -m spacy_elmo " + " ".join(a.replace(folder, "TMP") for a in arguments),
                "corpus_bytes": corpus.stat().st_size, "corpus_lines": corpus.read_bytes().count(b"\n") or 1,
                "uses_in_corpus": expected[name], "uses_seen": seen, "uses_kept": kept,
                **ran, "passed": ran["passed"] and seen == expected[name] and kept is not None and kept <= TOP,
            }
            if cases[name]["message"]:
                cases[name]["message"] = cases[name]["message"].replace(folder, "TMP")
            print(f"{name}: {ran['outcome']} in {ran['seconds']} s, peak {ran['peak_mb']} MB, {seen} uses seen, "
                  f"{kept} kept", file=sys.stderr, flush=True)
    record = {
        "provenance": provenance(model=model_record(args.model), model_note="the biLM neighbors ran", data={},
                                 data_note="the corpora are written by the run itself (cases: corpus_bytes, corpus_lines)"),
        "query": QUERY, "word": WORD, "top": TOP, "budget_mb": args.budget_mb,
        "passed": all(c["passed"] for c in cases.values()), "cases": cases,
    }
    return finish_record(record, args.output)


if __name__ == "__main__":
    sys.exit(main())
