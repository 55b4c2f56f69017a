"""Write the bundled sample (sample/): seeded subsets of UD English-EWT (CC BY-SA 4.0) and WNUT-17 (CC BY 4.0).

Only openly licensed corpora go into the repository (never CoNLL-2003). The sample is what the ``main``
workflow trains and evaluates on; re-running this script with the same seed reproduces it byte for byte.
CoNLL-U files keep ID, FORM, UPOS and MISC and blank the other columns, to keep the repository small.

    python -m lab.corpus.make_sample --datasets assets/datasets --output sample
"""
import argparse
import random
import re
from pathlib import Path
from typing import List, Optional, Sequence

# (source folder, file, sample name, sentences kept)
FILES = [
    ("ud_english_ewt", "en_ewt-ud-train.conllu", "ewt/train.conllu", 1000),
    ("ud_english_ewt", "en_ewt-ud-dev.conllu", "ewt/dev.conllu", 200),
    ("ud_english_ewt", "en_ewt-ud-test.conllu", "ewt/test.conllu", 300),
    ("wnut17", "wnut17train.conll", "wnut17/train.conll", 1000),
    ("wnut17", "emerging.dev.conll", "wnut17/dev.conll", 200),
    ("wnut17", "emerging.test.annotated", "wnut17/test.conll", 300),
]
KEPT_CONLLU_COLUMNS = (0, 1, 3, 9)


def sentence_blocks(text: str) -> List[str]:
    """Blocks separated by blank lines (WNUT-17 writes them as a lone tab), each with its trailing newline."""
    return [block.strip("\n") + "\n" for block in re.split(r"\n[ \t]*\n", text) if block.strip()]


def reduce_conllu(block: str) -> str:
    lines = []
    for line in block.splitlines():
        if line.startswith("#"):
            lines.append(line)
            continue
        cols = line.split("\t")
        lines.append("\t".join(c if i in KEPT_CONLLU_COLUMNS else "_" for i, c in enumerate(cols)))
    return "\n".join(lines) + "\n"


def sample_blocks(blocks: Sequence[str], n: int, seed: int) -> List[str]:
    """``n`` blocks picked by a seeded shuffle, in corpus order."""
    order = list(range(len(blocks)))
    random.Random(seed).shuffle(order)
    return [blocks[i] for i in sorted(order[:n])]


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", type=Path, default=Path("assets/datasets"), help="project.yml's vars.datasets")
    parser.add_argument("--output", type=Path, default=Path("sample"))
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    for folder, name, target, n in FILES:
        blocks = sentence_blocks((args.datasets / folder / name).read_text(encoding="utf-8"))
        chosen = sample_blocks(blocks, n, args.seed)
        if target.endswith(".conllu"):
            chosen = [reduce_conllu(b) for b in chosen]
        out = args.output / target
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text("\n".join(chosen) + "\n", encoding="utf-8")
        print(f"{out}: {len(chosen)} of {len(blocks)} sentences")


if __name__ == "__main__":
    main()
