"""Tiny probe data written to temporary folders, and feature extractors with a planted signal."""
import random
import zipfile
import zlib
from pathlib import Path
from typing import Dict, List, Sequence, Tuple

import numpy as np
import pytest

TAGS = ["NOUN", "VERB", "ADJ", "DET"]
WORDS = ["alpha", "beta", "gamma", "delta", "eps", "zeta", "eta", "theta", "iota", "kappa"]
SENSES = ["bank%river", "bank%money", "bank%tilt"]


def tagged_sentences(n: int, seed: int) -> List[Tuple[Tuple[str, ...], Tuple[str, ...]]]:
    """Random words with random tags: a tag does not follow from its word, only from the planted layer."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        length = rng.randint(4, 9)
        out.append((tuple(rng.choice(WORDS) for _ in range(length)), tuple(rng.choice(TAGS) for _ in range(length))))
    return out


def write_conllu(path: Path, sentences) -> Path:
    blocks = []
    for i, (words, tags) in enumerate(sentences):
        lines = [f"# sent_id = s{i}"]
        lines += [f"{k + 1}\t{w}\t{w}\t{t}\t_\t_\t0\tdep\t_\t_" for k, (w, t) in enumerate(zip(words, tags))]
        blocks.append("\n".join(lines) + "\n")
    path.write_text("\n".join(blocks) + "\n", encoding="utf-8")
    return path


def sense_uses(n: int, seed: int) -> List[Tuple[str, Tuple[str, ...], int]]:
    """(sense, tokens, position) of 'bank' in random contexts."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        tokens = [rng.choice(WORDS) for _ in range(rng.randint(3, 8))]
        position = rng.randrange(len(tokens) + 1)
        tokens.insert(position, "bank")
        out.append((rng.choice(SENSES), tuple(tokens), position))
    return out


def write_plain_wsd(path: Path, uses) -> Path:
    path.write_text("# word sense index tokens\n" + "".join(
        f"bank\t{sense}\t{position}\t{' '.join(tokens)}\n" for sense, tokens, position in uses
    ), encoding="utf-8")
    return path


def wic_pairs(n: int, seed: int) -> List[Tuple[Tuple[str, ...], int, int, Tuple[str, ...], int, int]]:
    """(first, position, sense, second, position, sense); half the pairs share the sense."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        senses = [rng.randrange(4)]
        senses.append(senses[0] if i % 2 == 0 else (senses[0] + rng.randrange(1, 4)) % 4)
        sides = []
        for sense in senses:
            tokens = [rng.choice(WORDS) for _ in range(rng.randint(3, 7))]
            position = rng.randrange(len(tokens) + 1)
            tokens.insert(position, "play")
            sides.append((tuple(tokens), position, sense))
        out.append(sides[0] + sides[1])
    return out


def write_wic(directory: Path, name: str, pairs) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    data = directory / f"{name}.data.txt"
    data.write_text("".join(
        f"play\tV\t{p1}-{p2}\t{' '.join(a)}\t{' '.join(b)}\n" for a, p1, _, b, p2, _ in pairs
    ), encoding="utf-8")
    gold = ["T" if pair[2] == pair[5] else "F" for pair in pairs]
    (directory / f"{name}.gold.txt").write_text("\n".join(gold) + "\n", encoding="utf-8")
    return data


class PlantedFeatures:
    """A feature extractor of ``n_layers`` noise layers, where layer ``layer`` also holds a one-hot of the
    label planted for a (sentence, position): a biLM layer built to carry the label."""

    identity = "planted"

    def __init__(self, labels: Dict[Tuple[Tuple[str, ...], int], int], *, layer: int, n_layers: int = 3,
                 width: int = 12, noise: float = 0.3) -> None:
        self.labels, self.layer, self.n_layers, self.width, self.noise = labels, layer, n_layers, width, noise
        self.calls: List[Tuple[str, ...]] = []

    def embed(self, sentences: Sequence[Sequence[str]], *, batch_size: int = 64) -> List[np.ndarray]:
        out = []
        for sentence in sentences:
            sentence = tuple(sentence)
            self.calls.append(sentence)
            rng = np.random.default_rng(zlib.crc32("\x00".join(sentence).encode("utf-8")))
            array = rng.normal(scale=self.noise, size=(self.n_layers, len(sentence), self.width)).astype(np.float32)
            for position in range(len(sentence)):
                label = self.labels.get((sentence, position))
                if label is not None:
                    array[self.layer, position, label] += 1.0
            out.append(array)
        return out


def planted_tags(sentences, *, layer: int) -> PlantedFeatures:
    labels = {(words, k): TAGS.index(tag) for words, tags in sentences for k, tag in enumerate(tags)}
    return PlantedFeatures(labels, layer=layer)


@pytest.fixture()
def upos_files(tmp_path):
    """(train, eval) .conllu files and their sentences."""
    train, held_out = tagged_sentences(80, seed=1), tagged_sentences(40, seed=2)
    return write_conllu(tmp_path / "train.conllu", train), write_conllu(tmp_path / "dev.conllu", held_out), train + held_out


@pytest.fixture()
def wsd_file(tmp_path):
    uses = sense_uses(150, seed=3)
    return write_plain_wsd(tmp_path / "bank.tsv", uses), uses


@pytest.fixture()
def wic_dirs(tmp_path):
    train, held_out = wic_pairs(120, seed=4), wic_pairs(60, seed=5)
    return write_wic(tmp_path / "wic" / "train", "train", train), write_wic(tmp_path / "wic" / "test", "test", held_out), train + held_out


SENSEVAL_XML = """<corpus lang="en">
<lexelt item="hard-a">
<instance id="hard-a.x1:">
<answer instance="hard-a.x1:" senseid="HARD1"/>
<context>
<s snum="1"/> <wf pos="PRP">it</wf> <wf pos="VBZ">is</wf> <head> <wf pos="JJ">hard</wf></head> <compound> <wf pos="JJ">to-reach</wf> </compound> <wf pos=".">.</wf>
</context>
</instance>
<instance id="hard-a.x2:">
<answer instance="hard-a.x2:" senseid="HARD2"/>
<context>
 <wf pos="DT">a</wf> <head> <wf pos="JJ">hard</wf></head> <wf pos="NN">rock</wf> <wf pos="NN">&amp;</wf>
</context>
</instance>
</lexelt>
</corpus>
"""


def write_senseval_zip(path: Path) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("senseval/hard.pos", SENSEVAL_XML)
        archive.writestr("senseval/README", "not data")
    return path
