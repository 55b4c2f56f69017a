"""Model sources: one class per format; a zip and the same files unpacked behave the same; nothing
outside io/ asks which class it holds; the head types are a leaf of io/."""
import ast
import tarfile
import warnings
import zipfile
from pathlib import Path

import pytest
import torch

import spacy_elmo
from spacy_elmo.pipeline import create_pipeline
from spacy_elmo.io.loading import locate_bilm
from spacy_elmo.io.sources import EFMLSource, ModelSource, NativeSource, PairBundleSource, TensorFlowSource

from ..conftest import DATA, random_bilm

PACKAGE = Path(spacy_elmo.__file__).parent
BILM_TF = DATA / "bilm_tf"
EFML_ZIP = DATA / "elmoformanylangs" / "published" / "relative-config-path.zip"


def _unpack(archive: Path, folder: Path) -> Path:
    if zipfile.is_zipfile(archive):
        with zipfile.ZipFile(archive) as packed:
            packed.extractall(folder)
    else:
        with tarfile.open(archive) as packed:
            packed.extractall(folder, filter="data")
    inner = [p for p in folder.iterdir()]
    return inner[0] if len(inner) == 1 and inner[0].is_dir() else folder


@pytest.mark.parametrize("archive, kind", [
    (BILM_TF / "nlpl_full.zip", PairBundleSource),
    (BILM_TF / "nlpl_no_vocab.zip", PairBundleSource),
    (BILM_TF / "deeppavlov_lm.tar.gz", TensorFlowSource),
    (BILM_TF / "deeppavlov_hub.tar.gz", TensorFlowSource),
    (EFML_ZIP, EFMLSource),
])
def test_an_archive_and_its_files_unpacked_are_one_source_with_the_same_model_head_and_language(tmp_path, archive, kind):
    folder = _unpack(archive, tmp_path / "unpacked")
    packed, unpacked = locate_bilm(archive), locate_bilm(folder)
    assert type(packed) is type(unpacked) is kind
    assert packed.language == unpacked.language
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a TF-Hub module's options are bilm-tf's published values
        a, b = packed.load(), unpacked.load()
    assert a.state_dict().keys() == b.state_dict().keys()
    assert all(torch.equal(a.state_dict()[k], b.state_dict()[k]) for k in a.state_dict())
    heads = packed.head(), unpacked.head()
    assert (heads[0] is None) == (heads[1] is None)
    if heads[0] is not None:
        assert heads[0].words == heads[1].words and torch.equal(heads[0].softmax.weight, heads[1].softmax.weight)
    for source in (packed, unpacked):
        assert all(path.is_file() for path in source.files())
        assert str(source.path) in source.description and "\n" not in source.description


def test_our_directory_the_shipped_model_and_a_pipeline_say_what_they_are(tmp_path):
    shipped = locate_bilm()
    assert isinstance(shipped, NativeSource) and shipped.language == "en" and shipped.name == "en_small"
    assert shipped.version() and shipped.files()[0].name == "model.safetensors" and shipped.head() is not None
    assert shipped.training_record() is not None and shipped.training_vocabulary().name == "vocab.txt"
    create_pipeline(random_bilm(seed=2), lang="de").to_disk(tmp_path / "pipeline")
    pipeline = locate_bilm(tmp_path / "pipeline")
    assert pipeline.language == "de" and pipeline.name == "de_pipeline" and pipeline.version() == "0.0.0"
    assert "a spaCy pipeline" in pipeline.description and pipeline.files()[0].parent.name == "model"
    pair = locate_bilm(DATA / "allennlp" / "tiny")
    assert pair.training_record() is None and pair.training_vocabulary() is None and pair.version() is None


def _imports(path: Path):
    """Every ``from X import`` of a module, function-level ones included, as module names."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts[:-1])
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            module = f"{base}.{node.module}" if base and node.module else (node.module or base)
            yield module, [alias.name for alias in node.names]
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, []


def test_the_head_types_are_a_leaf_of_io():
    """lm_head reads no model format but the HDF5 and ours, and holds them to the size limits
    (tests/test_layering.py finds no import circle anywhere in the package)."""
    imported = set()
    for module, names in _imports(PACKAGE / "io" / "lm_head.py"):
        if module == "spacy_elmo.io":
            imported.update(names)
        elif module.startswith("spacy_elmo.io."):
            imported.add(module.split(".")[2])
    assert imported <= {"errors", "allennlp", "native", "limits"}


def test_no_module_outside_io_asks_which_kind_of_source_it_holds():
    kinds = {cls.__name__ for cls in (EFMLSource, NativeSource, PairBundleSource, TensorFlowSource)}
    kinds |= {cls.__name__ for cls in ModelSource.__subclasses__()} | {"PairSource", "PublishedPairSource"}
    asking = []
    for path in PACKAGE.rglob("*.py"):
        if path.parent == PACKAGE / "io":
            continue
        for module, names in _imports(path):
            asking += [f"{path.relative_to(PACKAGE)}: {n}" for n in names if n in kinds]
        # nor reaches a class through its module (``sources.NativeSource``, ``isinstance(s, ...)``)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            named = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else None
            if named in kinds:
                asking.append(f"{path.relative_to(PACKAGE)}:{node.lineno}: {named}")
    assert asking == []
