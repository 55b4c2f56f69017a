"""Model directories travel (shipped, packaged, copied): their config.json names files, never the
directories of the machine that wrote them."""
import json
from pathlib import Path
from typing import Any, Iterator

from spacy_elmo import load_bilm
from spacy_elmo.training.finetune import finetune
from spacy_elmo.training.model_dir import is_absolute_path, portable
from spacy_elmo.training.pretrain import pretrain

from .conftest import ROOT, tiny_config

SHIPPED = ROOT / "spacy_elmo" / "models" / "en_small"


def strings(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings(item)
    elif isinstance(value, str):
        yield value


def absolute_paths(config_path: Path) -> list:
    config = json.loads(config_path.read_text(encoding="utf-8"))
    return [s for s in strings(config) if any(is_absolute_path(part.strip()) for part in s.split(","))]


def test_portable_keeps_file_names_only():
    extra = {
        "paths": {"train": "/data/corpus/train.txt", "dev": "dev.txt", "many": "/a/x.txt,rel/y.txt"},
        "start": "/runs/pretrain/model-best",
        "windows": "C:\\runs\\model-best",
        "home": "~/corpus/ewt-train.txt",
        "kept": ["corpus/ewt-dev.txt", 3, None, "forward/backward"],
    }
    assert portable(extra) == {
        "paths": {"train": "train.txt", "dev": "dev.txt", "many": "x.txt,rel/y.txt"},
        "start": "model-best",
        "windows": "model-best",
        "home": "ewt-train.txt",
        "kept": ["corpus/ewt-dev.txt", 3, None, "forward/backward"],
    }


def test_saved_model_dirs_hold_no_absolute_paths(lm_corpus, tmp_path):
    train, dev = lm_corpus
    assert train.is_absolute() and dev.is_absolute()
    pre = tmp_path / "pre"
    pretrain(tiny_config(train, dev, training__max_steps=4, training__eval_frequency=4), pre)
    finetune(tiny_config(train, dev, training__max_steps=2), tmp_path / "ft", model=(pre / "model-best").resolve())
    written = [pre / "model-best", pre / "model-last", tmp_path / "ft" / "model-best", tmp_path / "ft" / "model-last"]
    for model in written:
        assert absolute_paths(model / "config.json") == [], model
    extra = json.loads((tmp_path / "ft" / "model-last" / "config.json").read_text(encoding="utf-8"))["extra"]
    assert extra["start"] == "model-best" and extra["training_config"]["paths"]["train"] == train.name


def test_shipped_config_holds_no_absolute_paths_and_still_loads():
    assert absolute_paths(SHIPPED / "config.json") == []
    assert load_bilm(SHIPPED).config.projection_dim == 128  # weights_sha256 still matches the weights
