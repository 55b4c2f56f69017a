"""Build small ELMoForManyLangs (EFML) models of several architectures with EFML's own code, and
EFML's outputs for the fixture sentences: tests/data/elmoformanylangs/variants/<name>/.

Runs in a side environment that has the real package, never inside spacy-elmo (nothing here is
imported by the package or its tests):

    python -m venv EFML_VENV          # EFML_VENV: any folder for the side environment
    EFML_VENV/bin/pip install torch==2.13.0 elmoformanylangs==0.0.4.post2 overrides==3.1.0 h5py numpy
    EFML_VENV/bin/python scripts/make_efml_fixtures.py

(``overrides>=4`` breaks ``import elmoformanylangs``: EFML issue #95.) The model directory is made
as EFML's trainer (``biLM.py train()``) makes it, up to its first epoch: the vocabularies by its
``read_corpus`` and ``get_truncated_vocab`` and the lexicon loops of ``train()`` on a small corpus
written here, the modules by ``biLM.Model`` with ``EmbeddingLayer``s, then every tensor of the token
embedder and the encoder redrawn from N(0, std²) with the variant's seed (training would move them
anyway; seeded draws make the clips and gates matter), saved by ``Model.save_model`` (torch's zip
format, as EFML writes with torch >= 1.6; ``legacy`` variants in the pre-1.6 format of the
published models). The outputs come from EFML's ``Embedder(model_dir).sents2elmo(...,
output_layer=-2)`` with a fresh state (``encoder.reset_states()``) and one batch, and the ids from
EFML's ``create_one_batch``, one sentence at a time.
"""
import argparse
import contextlib
import functools
import hashlib
import json
import shutil
import tempfile
from importlib.metadata import version
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional

import numpy as np
import torch

from elmoformanylangs import biLM
from elmoformanylangs.elmo import Embedder, read_list
from elmoformanylangs.frontend import create_one_batch
from elmoformanylangs.modules.embedding_layer import EmbeddingLayer

FIXTURE = Path(__file__).resolve().parent.parent / "tests" / "data" / "elmoformanylangs"
EFML_COMMIT = "b3de5f1dc1ac13638a930b49c41e1f1e0e185ca1"  # GitHub HIT-SCIR/ELMoForManyLangs, same files as 0.0.4.post2

# Training text for the vocabularies: whitespace-tokenized lines, as EFML's read_corpus reads them.
# It leaves some characters of the fixture sentences out ("I", "٣", "🎉", ...) so that <oov> occurs.
CORPUS = """\
the cat sat on the mat .
a dog and the cat ran to the park .
Café naïve über ÜBER Cat CAT
Москва — столица России .
Ελληνικά γράμματα : αβγδ .
北京 欢迎 你 。 中 文 日本語
مرحبا بالعالم ؟
3.14 1,000 ( ) " ' -- ... … % 2024
emoji 🙂 ❤ New York
aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb
Donaudampfschifffahrtselektrizitätenhauptbetriebswerkbauunterbeamtengesellschaft x
the cat and the dog .
"""

BASE: Dict[str, Any] = {
    "encoder": {"name": "elmo", "projection_dim": 8, "cell_clip": 3, "proj_clip": 1, "dim": 16, "n_layers": 2},
    "token_embedder": {
        "name": "cnn",
        "activation": "relu",
        "filters": [[1, 4], [2, 4], [3, 8]],
        "n_highway": 2,
        "word_dim": 4,
        "char_dim": 8,
        "max_characters_per_token": 50,
    },
    "classifier": {"name": "sampled_softmax", "n_samples": 8192},
    "dropout": 0.1,
}

# per variant: changes to BASE's encoder / token_embedder, the seed, legacy pickles, what it covers
VARIANTS: Dict[str, Dict[str, Any]] = {
    "no-word": {
        "token_embedder": {"word_dim": 0},
        "seed": 2,
        "about": "word_dim 0: no word embedding; the projection reads the highway output only",
    },
    "tanh": {
        "token_embedder": {"activation": "tanh"},
        "seed": 3,
        "about": "tanh after the CNN's max-pooling (the highway stays relu)",
    },
    "one-highway": {
        "token_embedder": {"n_highway": 1},
        "seed": 4,
        "legacy": True,
        "about": "one highway layer; legacy (pre-zip) pickles like the published models",
    },
    "no-highway": {
        "token_embedder": {"n_highway": 0},
        "seed": 5,
        "about": "no highway layer: the CNN features go straight to the projection",
    },
    "sizes": {
        "encoder": {"projection_dim": 12, "dim": 20, "cell_clip": 2, "proj_clip": 2},
        "token_embedder": {
            "filters": [[1, 4], [2, 4], [3, 6], [4, 6], [5, 8]],
            "char_dim": 6,
            "word_dim": 5,
            "max_characters_per_token": 20,
        },
        "seed": 6,
        "about": "other widths (projection 12, cell 20, five filters, char_dim 6, word_dim 5) and 20 chars a token (18 kept)",
    },
    "three-layers": {
        "encoder": {"n_layers": 3},
        "seed": 7,
        "about": "three biLSTM layers (residual from the second on)",
    },
    "no-clip": {
        "encoder": {"cell_clip": 0, "proj_clip": None},
        "seed": 8,
        "about": "cell_clip 0 and proj_clip null: EFML tests their truth, so no clipping",
    },
    "words-only": {
        "token_embedder": {"char_dim": 0, "word_dim": 8},
        "seed": 9,
        "about": "char_dim 0: word embedding only, no char.dic (EFML runs it; spacy-elmo refuses it)",
    },
}


def architecture(variant: Dict[str, Any]) -> Dict[str, Any]:
    config = json.loads(json.dumps(BASE))
    for section in ("encoder", "token_embedder"):
        config[section].update(variant.get(section, {}))
    return config


def config_name(config: Dict[str, Any]) -> str:
    """EFML's naming of its sample configs: cnn_<char_dim>_<word_dim>_<projection>_<dim>_sample.json."""
    te, enc = config["token_embedder"], config["encoder"]
    return f"cnn_{te['char_dim']}_{te['word_dim']}_{enc['projection_dim']}_{enc['dim']}_sample.json"


def lexicons(train_data: List[List[str]], config: Dict[str, Any]):
    """The word and char lexicons exactly as EFML's ``train()`` builds them (no pre-trained vectors)."""
    word_lexicon: Dict[str, int] = {}
    for special_word in ["<oov>", "<bos>", "<eos>", "<pad>"]:
        if special_word not in word_lexicon:
            word_lexicon[special_word] = len(word_lexicon)
    for word, _ in biLM.get_truncated_vocab(train_data, 1):
        if word not in word_lexicon:
            word_lexicon[word] = len(word_lexicon)
    char_lexicon: Optional[Dict[str, int]] = None
    if config["token_embedder"]["char_dim"] > 0:
        char_lexicon = {}
        for sentence in train_data:
            for word in sentence:
                for ch in word:
                    if ch not in char_lexicon:
                        char_lexicon[ch] = len(char_lexicon)
        for special_char in ["<bos>", "<eos>", "<oov>", "<pad>", "<bow>", "<eow>"]:
            if special_char not in char_lexicon:
                char_lexicon[special_char] = len(char_lexicon)
    return word_lexicon, char_lexicon


@contextlib.contextmanager
def legacy_torch_save(enabled: bool) -> Iterator[None]:
    """Make EFML's own ``torch.save`` calls write the pre-1.6 (non-zip) format."""
    if not enabled:
        yield
        return
    original = torch.save
    torch.save = functools.partial(original, _use_new_zipfile_serialization=False)
    try:
        yield
    finally:
        torch.save = original


def build_model(
    out: Path, config: Dict[str, Any], *, corpus: str, seed: int, std: Optional[float], legacy: bool, work: Path
) -> None:
    """Write an EFML model directory with the files and formats of EFML's trainer.

    corpus (str): the training text its vocabularies are built from (one sentence a line).
    std (Optional[float]): redraw every tensor from N(0, std²); None keeps EFML's own initialization.
    """
    corpus_path = work / "train.txt"
    corpus_path.write_text(corpus, encoding="utf-8")
    te = config["token_embedder"]
    train_data = biLM.read_corpus(str(corpus_path), te["max_characters_per_token"], 20)
    word_lexicon, char_lexicon = lexicons(train_data, config)
    torch.manual_seed(seed)
    word_emb = EmbeddingLayer(te["word_dim"], word_lexicon, fix_emb=False) if te["word_dim"] > 0 else None
    char_emb = EmbeddingLayer(te["char_dim"], char_lexicon, fix_emb=False) if char_lexicon is not None else None
    model = biLM.Model(config, word_emb, char_emb, len(word_lexicon), use_cuda=False)
    if std is not None:
        with torch.no_grad():
            for module in (model.token_embedder, model.encoder):
                for tensor in module.state_dict().values():
                    tensor.normal_(0.0, std)
    out.mkdir(parents=True)
    name = config_name(config)
    (out / name).write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    if char_lexicon is not None:
        with open(out / "char.dic", "w", encoding="utf-8") as fpo:
            for ch, i in char_emb.word2id.items():
                print("{0}\t{1}".format(ch, i), file=fpo)
    with open(out / "word.dic", "w", encoding="utf-8") as fpo:
        for w, i in word_lexicon.items():
            print("{0}\t{1}".format(w, i), file=fpo)
    options = {
        "seed": seed, "gpu": -1, "train_path": "train.txt", "valid_path": None, "test_path": None,
        "config_path": name, "word_embedding": None, "optimizer": "adam", "lr": 0.001, "lr_decay": 0.8,
        "model": out.name, "batch_size": 32, "max_epoch": 10, "clip_grad": 5, "max_sent_len": 20,
        "min_count": 1, "max_vocab_size": 150000, "save_classify_layer": False, "valid_size": 0, "eval_steps": 1,
    }  # fmt: skip
    with open(out / "config.json", "w", encoding="utf-8") as fpo:
        json.dump(options, fpo)
    with legacy_torch_save(legacy):
        model.save_model(str(out), False)


def efml_outputs(model_dir: Path, sentences: List[List[str]]) -> Dict[str, np.ndarray]:
    """EFML's layers (fresh state, one batch) and the ids its batcher builds for each sentence."""
    embedder = Embedder(str(model_dir), batch_size=64)
    embedder.model.encoder.reset_states()
    with torch.no_grad():
        layers = embedder.sents2elmo(sentences, output_layer=-2)
    arrays: Dict[str, np.ndarray] = {}
    config = embedder.config
    max_chars = config["token_embedder"]["max_characters_per_token"]
    for i, sentence in enumerate(sentences):
        arrays[f"layers_{i}"] = np.asarray(layers[i], dtype=np.float32)
        wrapped, _ = read_list([sentence], max_chars)
        words, chars, _, _ = create_one_batch(wrapped, embedder.word_lexicon, embedder.char_lexicon, config)
        if chars is not None:
            arrays[f"char_ids_{i}"] = chars[0].numpy().astype(np.int64)
        if words is not None:
            arrays[f"word_ids_{i}"] = words[0].numpy().astype(np.int64)
    return arrays


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=FIXTURE / "variants")
    parser.add_argument("--sentences", type=Path, default=FIXTURE / "sentences.json")
    parser.add_argument("--std", type=float, default=0.3)
    parser.add_argument("--only", nargs="*", help="variant names (default: all)")
    args = parser.parse_args()
    sentences = json.loads(args.sentences.read_text(encoding="utf-8"))
    torch.set_num_threads(1)
    names = args.only or list(VARIANTS)
    index = {}
    for name in names:
        variant = VARIANTS[name]
        config = architecture(variant)
        target = args.out / name
        if target.exists():
            shutil.rmtree(target)
        with tempfile.TemporaryDirectory() as work:
            build_model(target / "model", config, corpus=CORPUS, seed=variant["seed"], std=args.std,
                        legacy=bool(variant.get("legacy")), work=Path(work))  # fmt: skip
        arrays = efml_outputs(target / "model", sentences)
        np.savez_compressed(target / "golden.npz", **arrays)
        values = np.concatenate([arrays[f"layers_{i}"].ravel() for i in range(len(sentences))])
        again = efml_outputs(target / "model", sentences)
        assert all(np.array_equal(arrays[k], again[k]) for k in arrays), f"{name}: EFML is not deterministic"
        meta = {
            "about": variant["about"],
            "model_config": config,
            "seed": variant["seed"],
            "std": args.std,
            "pickle_format": "legacy" if variant.get("legacy") else "zip",
            "model_files_sha256": {p.name: sha256(p) for p in sorted((target / "model").iterdir())},
            "n_layers_out": int(arrays["layers_0"].shape[0]),
            "width": int(arrays["layers_0"].shape[2]),
            "value_range": {"min": float(values.min()), "max": float(values.max()),
                            "mean_abs": float(np.abs(values).mean())},  # fmt: skip
        }
        (target / "golden.json").write_text(json.dumps(meta, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        index[name] = variant["about"]
        print(f"{name}: {meta['n_layers_out']} layers x {meta['width']}, range {meta['value_range']}")
    if not args.only:
        index_data = {"versions": efml_versions(), "sentences": "../sentences.json", "variants": index}
        (args.out / "index.json").write_text(json.dumps(index_data, indent=2) + "\n", encoding="utf-8")


def efml_versions() -> Dict[str, str]:
    """The versions of EFML and of what it ran on."""
    return {
        "elmoformanylangs": version("elmoformanylangs"),
        "efml_commit": EFML_COMMIT,
        "torch": torch.__version__,
        "numpy": np.__version__,
        "overrides": version("overrides"),
    }


if __name__ == "__main__":
    main()
