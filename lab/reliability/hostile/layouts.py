"""Every published layout the package reads, built from the checkout's fixtures (tests/data/) and a
model saved by the package's own writer, and the damages particular to each format: sizes in
options and configs, HDF5 datasets, safetensors headers, ELMoForManyLangs tensors and dictionaries,
TensorFlow checkpoint pointers, and zips and tarballs (bombs, path-like names, links, devices).

``build_corpus(root)`` writes the whole corpus and returns its cases.
"""
import json
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence

import torch

from lab import CHECKOUT

from . import damage
from .cases import Case, Corpus, Layout, file_damages

DATA = CHECKOUT / "tests" / "data"
BILM_TF = DATA / "bilm_tf"
EFML = DATA / "elmoformanylangs"
# the size: a zip or tarball member of zeros that inflates to 1.5 GiB
BOMB_BYTES = 1536 << 20

# options.json edits: sizes a loader must check before it allocates, and values of the wrong type
OPTION_EDITS: Dict[str, Callable] = {
    "lstm-dim-4e6": damage.setter("lstm", "dim", 4_000_000),
    "projection-dim-2e31": damage.setter("lstm", "projection_dim", 2**31),
    "embedding-dim-1e9": damage.setter("char_cnn", "embedding", "dim", 10**9),
    "n-characters-2e40": damage.setter("char_cnn", "n_characters", 2**40),
    "filters-1e8": damage.setter("char_cnn", "filters", [[1, 10**8]]),
    "n-layers-1e6": damage.setter("lstm", "n_layers", 10**6),
    "n-highway-1e6": damage.setter("char_cnn", "n_highway", 10**6),
    "max-characters-1e9": damage.setter("char_cnn", "max_characters_per_token", 10**9),
    "dim-negative": damage.setter("lstm", "dim", -1),
    "dim-zero": damage.setter("lstm", "dim", 0),
    "dim-string": damage.setter("lstm", "dim", "64"),
    "dim-fraction": damage.setter("lstm", "dim", 64.5),
    "dim-null": damage.setter("lstm", "dim", None),
    "dim-nan": damage.setter("lstm", "dim", float("nan")),
    "filters-string": damage.setter("char_cnn", "filters", "wide"),
    "no-lstm": damage.remover("lstm"),
    "json-list": lambda content: [content],
}
# the few every other layout with an options file gets
OPTION_SAMPLE = ("lstm-dim-4e6", "projection-dim-2e31", "n-characters-2e40", "dim-string")
EFML_ARCHITECTURE_EDITS: Dict[str, Callable] = {
    "encoder-dim-4e6": damage.setter("encoder", "dim", 4_000_000),
    "projection-dim-2e31": damage.setter("encoder", "projection_dim", 2**31),
    "char-dim-1e9": damage.setter("token_embedder", "char_dim", 10**9),
    "filters-1e8": damage.setter("token_embedder", "filters", [[1, 10**8]]),
    "n-highway-1e6": damage.setter("token_embedder", "n_highway", 10**6),
    "n-layers-negative": damage.setter("encoder", "n_layers", -2),
    "word-dim-string": damage.setter("token_embedder", "word_dim", "eight"),
}


def layouts(native: Path) -> Dict[str, Layout]:
    """The layouts, by name; ``native``: a model directory written by ``save_bilm``."""
    return {layout.name: layout for layout in [
        Layout("allennlp-pair", DATA / "allennlp" / "tiny", ["options.json", "weights.hdf5"],
               pair=("options.json", "weights.hdf5")),
        Layout("bilm_tf-folder", native.parent / "bilm_tf-folder", ["options.json", "model.hdf5", "vocab.txt"],
               optional=["vocab.txt"]),
        Layout("nlpl-zip", BILM_TF / "nlpl_full.zip"),
        Layout("nlpl-zip-no-vocab", BILM_TF / "nlpl_no_vocab.zip"),
        Layout("tf-checkpoint", BILM_TF / "checkpoint_folder",
               ["checkpoint", "model.ckpt-24.index", "model.ckpt-24.data-00000-of-00001", "options.json",
                "vocab.txt", "model.ckpt-24.meta"],
               # a checkpoint's sizes come from its tensors, and its .index is found without the pointer file
               optional=["vocab.txt", "model.ckpt-24.meta", "options.json", "checkpoint"]),
        Layout("tfhub-module", BILM_TF / "tfhub_module",
               ["saved_model.pb", "tfhub_module.pb", "variables/variables.index",
                "variables/variables.data-00000-of-00002", "variables/variables.data-00001-of-00002"],
               optional=["tfhub_module.pb", "saved_model.pb"]),
        Layout("deeppavlov-lm-tar", BILM_TF / "deeppavlov_lm.tar.gz"),
        Layout("deeppavlov-hub-tar", BILM_TF / "deeppavlov_hub.tar.gz"),
        Layout("efml-folder", EFML / "model",
               ["config.json", "cnn_16_8_16_32_sample.json", "char.dic", "word.dic", "token_embedder.pkl",
                "encoder.pkl"]),
        Layout("efml-zip", EFML / "published" / "relative-config-path.zip"),
        Layout("seqvec-folder", DATA / "contributed" / "seqvec" / "uniref50_v2", ["options.json", "weights.hdf5"]),
        Layout("native", native, ["config.json", "model.safetensors"]),
    ]}


def build_corpus(root: Path, *, seed: int = 0, bomb_bytes: int = BOMB_BYTES,
                 only: Optional[Sequence[str]] = None) -> List[Case]:
    """Write every case under ``root`` (created) and return them; ``bomb_bytes``: what a bomb inflates
    to; ``only``: the names of the cases to build (default: all)."""
    from spacy_elmo import load_bilm, save_bilm

    root = Path(root)
    sources = root / "_sources"
    sources.mkdir(parents=True)
    native = save_bilm(load_bilm(DATA / "allennlp" / "tiny", optimize=False), sources / "native")
    (sources / "bilm_tf-folder").mkdir()
    for name in ("options.json", "model.hdf5", "vocab.txt"):
        damage.copy_fixture(BILM_TF / name, sources / "bilm_tf-folder" / name)
    found = layouts(native)
    corpus = Corpus(root, seed, only)
    for layout in found.values():
        corpus.intact(layout)
        file_damages(corpus, layout)
    _options_cases(corpus, found)
    _hdf5_cases(corpus, found)
    _safetensors_cases(corpus, found["native"])
    _efml_cases(corpus, found["efml-folder"])
    _checkpoint_cases(corpus, found["tf-checkpoint"])
    _zip_cases(corpus, found, bomb_bytes)
    _tar_cases(corpus, found, bomb_bytes)
    return corpus.cases


def _options_cases(corpus: Corpus, found: Dict[str, Layout]) -> None:
    for name, edit in OPTION_EDITS.items():
        # sizes must be whole numbers: a number written as a string is refused too
        corpus.add(found["allennlp-pair"], f"options-{name}", lambda p, r, e=edit: damage.edit_json(p, e),
                   target="options.json", kind="options")
    raw = {"options-not-json": lambda p, r: p.write_text('{"lstm": {"dim": }', encoding="utf-8"),
           "options-deep-json": lambda p, r: damage.deep_json(p)}
    for name, apply in raw.items():
        corpus.add(found["allennlp-pair"], name, apply, target="options.json", kind="options")
    for layout in ("bilm_tf-folder", "seqvec-folder", "tf-checkpoint"):
        for name in OPTION_SAMPLE:
            # a checkpoint's options that contradict its tensors are overruled by them, with a warning
            corpus.add(found[layout], f"options-{name}", lambda p, r, e=OPTION_EDITS[name]: damage.edit_json(p, e),
                       target="options.json", kind="options", may_load=layout == "tf-checkpoint")
        corpus.add(found[layout], "options-deep-json", lambda p, r: damage.deep_json(p), target="options.json",
                   kind="options")
    for name in OPTION_SAMPLE:
        corpus.add(found["native"], f"config-{name}",
                   lambda p, r, e=OPTION_EDITS[name]: damage.edit_json(p, lambda c: e(c["options"])),
                   target="config.json", kind="options")


def _hdf5_edits(names: Dict[str, tuple]) -> Dict[str, tuple]:
    """(edit of the file, may load) by damage name, for an HDF5 file holding the datasets ``names``."""
    char = next(n for n in names if n.endswith("char_embed"))
    w0 = next(n for n in sorted(names) if n.endswith("LSTMCell/W_0"))
    wp = next(n for n in sorted(names) if n.endswith("LSTMCell/W_P_0"))
    cnn = next(n for n in sorted(names) if "W_cnn" in n)
    shape = names[char]
    return {
        "hdf5-missing-char_embed": (lambda p: damage.hdf5_drop(p, char), False),
        "hdf5-missing-lstm-W_0": (lambda p: damage.hdf5_drop(p, w0), False),
        "hdf5-swapped-W_0-W_P_0": (lambda p: damage.hdf5_swap(p, w0, wp), False),
        "hdf5-char_embed-156M-rows": (lambda p: damage.hdf5_replace(p, char, damage.huge_dataset((156_600_000, 4))), False),
        "hdf5-lstm-W_0-2e31-wide": (lambda p: damage.hdf5_replace(p, w0, damage.huge_dataset((names[w0][0], 2**31))), False),
        "hdf5-cnn-6-dims": (lambda p: damage.hdf5_replace(p, cnn, damage.typed_dataset((1, 1, 1, 1, 1, 1), "f4")), False),
        "hdf5-char_embed-int8": (lambda p: damage.hdf5_replace(p, char, damage.typed_dataset(shape, "i1")), False),
        "hdf5-char_embed-float64": (lambda p: damage.hdf5_replace(p, char, damage.typed_dataset(shape, "f8")), True),
        "hdf5-char_embed-complex": (lambda p: damage.hdf5_replace(p, char, damage.typed_dataset(shape, "c8")), False),
        "hdf5-char_embed-strings": (lambda p: damage.hdf5_replace(p, char, damage.typed_dataset(shape, "str")), False),
        "hdf5-char_embed-scalar": (lambda p: damage.hdf5_replace(p, char, damage.typed_dataset((), "f4")), False),
        "hdf5-group-for-W_0": (lambda p: damage.hdf5_replace(p, w0, damage.group_in_place), False),
    }


def _hdf5_cases(corpus: Corpus, found: Dict[str, Layout]) -> None:
    for layout, target in (("allennlp-pair", "weights.hdf5"), ("bilm_tf-folder", "model.hdf5"),
                           ("seqvec-folder", "weights.hdf5")):
        names = damage.datasets(found[layout].source / target)
        for name, (edit, may_load) in _hdf5_edits(names).items():
            corpus.add(found[layout], name, lambda p, r, e=edit: e(p), target=target, may_load=may_load, kind="hdf5")


def _safetensors_cases(corpus: Corpus, layout: Layout) -> None:
    """Headers that lie, with config.json's checksum rewritten to match: the format itself must refuse."""
    from spacy_elmo.files import file_sha256

    def edited(edit: Callable[[dict, bytes], tuple]):
        def apply(folder: Path, rng) -> None:
            weights = folder / "model.safetensors"
            header, body, length = edit(*damage.safetensors_header(weights))
            damage.write_safetensors(weights, header, body, length=length)
            damage.edit_json(folder / "config.json", damage.setter("weights_sha256", file_sha256(weights)))
        return apply

    def names(header: dict) -> list:
        return sorted(k for k in header if k != "__metadata__")

    def first(header: dict, **change) -> dict:
        name = names(header)[0]
        return {**header, name: {**header[name], **change}}

    def swap(header: dict) -> dict:
        a, b = names(header)[:2]
        return {**header, a: header[b], b: header[a]}

    edits = {
        "length-2e62": lambda h, b: (h, b, 2**62),
        "length-past-end": lambda h, b: (h, b, len(json.dumps(h)) + len(b) + 10),
        "header-not-json": lambda h, b: (b"{not json" + b" " * 10, b, None),
        "header-bad-utf8": lambda h, b: (damage.INVALID_UTF8, b, None),
        "shape-huge": lambda h, b: (first(h, shape=[2**31, 2**31]), b, None),
        "dtype-f64": lambda h, b: (first(h, dtype="F64"), b, None),
        "dtype-unknown": lambda h, b: (first(h, dtype="Q99"), b, None),
        "offsets-past-end": lambda h, b: (first(h, data_offsets=[0, len(b) + 4096]), b, None),
        "offsets-reversed": lambda h, b: (first(h, data_offsets=[64, 0]), b, None),
        "tensor-missing": lambda h, b: ({k: v for k, v in h.items() if k != names(h)[0]}, b, None),
        "tensors-swapped": lambda h, b: (swap(h), b, None),
        "body-cut": lambda h, b: (h, b[:len(b) // 2], None),
    }
    for name, edit in edits.items():
        corpus.add(layout, f"safetensors-{name}", edited(edit), kind="safetensors")


def _efml_cases(corpus: Corpus, layout: Layout) -> None:
    for name, edit in EFML_ARCHITECTURE_EDITS.items():
        corpus.add(layout, f"architecture-{name}", lambda p, r, e=edit: damage.edit_json(p, e),
                   target="cnn_16_8_16_32_sample.json", kind="options")
    for name, path in (("outside", "../../../../../../etc/passwd"), ("absolute", "/etc/passwd"), ("folder", "."),
                       ("null", None)):
        corpus.add(layout, f"config_path-{name}", lambda p, r, v=path: damage.edit_json(p, damage.setter("config_path", v)),
                   target="config.json", kind="path", may_load=name in ("outside", "absolute", "null"))
    dictionaries = {
        "index-huge": "a\t99999999999\n", "index-negative": "a\t-5\n", "no-tab": "just a line\n",
        "index-text": "a\tseven\n",
    }
    for name, line in dictionaries.items():
        for dic in ("char.dic", "word.dic"):
            corpus.add(layout, f"{dic.split('.')[0]}-{name}",
                       lambda p, r, l=line: p.write_bytes(p.read_bytes() + l.encode("utf-8")), target=dic,
                       kind="dictionary", may_load=name == "no-tab")

    def tensors(edit: Callable[[dict], dict]):
        def apply(path: Path, rng) -> None:
            state = torch.load(path, weights_only=True, map_location="cpu")
            torch.save(edit(dict(state)), path)
        return apply

    def swap(state: dict) -> dict:
        keys = sorted(state, key=lambda k: (tuple(state[k].shape), k))
        return {**state, keys[0]: state[keys[-1]], keys[-1]: state[keys[0]]}

    edits = {
        "missing": (lambda s: {k: v for k, v in list(s.items())[1:]}, False),
        "swapped": (swap, False),
        "float64": (lambda s: {k: v.double() for k, v in s.items()}, True),
        "int32": (lambda s: {k: v.int() for k, v in s.items()}, False),
        "scalars": (lambda s: {k: torch.tensor(1.0) for k in s}, False),
        "not-tensors": (lambda s: {k: [1, 2, 3] for k in s}, False),
        "empty": (lambda s: {}, False),
    }
    for pkl in ("token_embedder.pkl", "encoder.pkl"):
        for name, (edit, may_load) in edits.items():
            corpus.add(layout, f"{pkl.split('.')[0]}-{name}", tensors(edit), target=pkl, may_load=may_load,
                       kind="tensors")


def _checkpoint_cases(corpus: Corpus, layout: Layout) -> None:
    pointers = {"outside": "../../../../../../etc/passwd", "absolute": "/etc/passwd", "absent": "model.ckpt-99",
                "folder": "."}
    for name, target in pointers.items():
        text = f'model_checkpoint_path: "{target}"\nall_model_checkpoint_paths: "{target}"\n'
        corpus.add(layout, f"checkpoint-points-{name}", lambda p, r, t=text: p.write_text(t, encoding="utf-8"),
                   target="checkpoint", kind="path", may_load=True)


def _zip_cases(corpus: Corpus, found: Dict[str, Layout], bomb_bytes: int) -> None:
    from .archives import zip_damages

    for layout, weights in (("nlpl-zip", "model.hdf5"), ("efml-zip", "encoder.pkl")):
        for name, (apply, may_load) in zip_damages(corpus.root, weights, bomb_bytes).items():
            # NLPL's full zip holds the TensorFlow checkpoint too: without the pair, that loads
            may_load = may_load or (layout == "nlpl-zip" and name.startswith("missing-"))
            corpus.add(found[layout], name, apply, may_load=may_load, kind=name.split("-")[0])


def _tar_cases(corpus: Corpus, found: Dict[str, Layout], bomb_bytes: int) -> None:
    from .archives import tar_damages

    for layout in ("deeppavlov-lm-tar", "deeppavlov-hub-tar"):
        for name, (apply, may_load) in tar_damages(corpus.root, found[layout].source, bomb_bytes).items():
            corpus.add(found[layout], name, apply, may_load=may_load, kind=name.split("-")[0])
