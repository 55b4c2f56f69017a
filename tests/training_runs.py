"""Small real `spacy train` runs shared by the downstream and packaging tests: a few dozen
sentences of the bundled UD EWT sample and the tiny biLM of tests/data/allennlp/tiny."""
from pathlib import Path

import spacy
from spacy.cli.train import train as spacy_train
from spacy.tokens import DocBin
from spacy.language import Language
from spacy.util import load_config

from spacy_elmo.io import load_allennlp, save_bilm

from lab.corpus import convert_corpus

ROOT = Path(__file__).parent.parent
CONFIGS = ROOT / "configs"
SAMPLE = ROOT / "sample" / "ewt"
TINY = Path(__file__).parent / "data" / "allennlp" / "tiny"
STEPS = 40
# words that make a short text classification task learnable in STEPS steps
CUES = {"pos": ("great", "wonderful", "moving", "superb"), "neg": ("awful", "dull", "boring", "terrible")}


def tiny_bilm():
    return load_allennlp(TINY / "options.json", TINY / "weights.hdf5")


def make_data(root: Path) -> Path:
    """root/bilm (the tiny biLM), root/train.spacy (40 sentences), root/dev.spacy (20). RETURNS root."""
    save_bilm(tiny_bilm(), root / "bilm")
    convert_corpus.convert("ud", SAMPLE / "train.conllu", root / "train.spacy", fraction=0.04, n_sents=5)
    convert_corpus.convert("ud", SAMPLE / "dev.conllu", root / "dev.spacy", fraction=0.1, n_sents=5)
    return root


def make_textcat_data(root: Path, *, n_train: int = 40, n_dev: int = 20) -> Path:
    """root/bilm (the tiny biLM), root/train.spacy and root/dev.spacy: Docs of a sentence of the
    UD EWT sample and one saying what the film was (CUES), with doc.cats {"pos": 1.0, "neg": 0.0}
    or the reverse, as lab/corpus/convert_corpus.py writes reviews. RETURNS root."""
    save_bilm(tiny_bilm(), root / "bilm")
    text = (SAMPLE / "train.conllu").read_text(encoding="utf-8")
    sentences = [words for words, _, _ in convert_corpus.read_conllu(text)]
    reviews = []
    for i in range(n_train + n_dev):
        label = convert_corpus.POLARITY_LABELS[i % 2]
        review = [sentences[i]]
        review.insert(i % 2, ["The", "film", "was", CUES[label][(i // 2) % 4], "."])
        reviews.append((label, review))
    vocab = spacy.blank("en").vocab
    for name, part in (("train.spacy", reviews[:n_train]), ("dev.spacy", reviews[n_train:])):
        DocBin(docs=convert_corpus.reviews_to_docs(vocab, part)).to_disk(root / name)
    return root


def train(config: Path, data: Path, output: Path, **overrides) -> Language:
    """Train with ``config`` for STEPS steps on ``data``; RETURNS the loaded model-last."""
    settings = {
        "paths.train": str(data / "train.spacy"),
        "paths.dev": str(data / "dev.spacy"),
        "training.max_steps": STEPS,
        "training.eval_frequency": STEPS,
    }
    if "elmo" in load_config(config)["nlp"]["pipeline"]:
        settings["paths.elmo"] = str(data / "bilm")
    spacy_train(config, output, overrides={**settings, **overrides})
    return spacy.load(output / "model-last")
