"""lab/campaign/gpu_stage.py: a training stage that needs neither spaCy nor thinc, packed into pieces
and unpacked again (run here on the CPU, with the tiny config)."""
import json
import subprocess
import sys

import pytest

from spacy_elmo.io import load_native
from spacy_elmo.training.pretrain import pretrain

from ...training.conftest import TINY_CFG, cli_env, tiny_config, write_corpus
from lab.campaign import gpu_stage as stage



def test_training_imports_neither_spacy_nor_thinc():
    code = (
        "import sys; import spacy_elmo.training.finetune, spacy_elmo.training.pretrain; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'spacy', 'thinc', 'blis'}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=cli_env(), check=True)
    assert out.stdout.strip() == "[]"


def test_a_stage_continues_the_model_and_comes_back_in_pieces(tmp_path):
    corpus = tmp_path / "corpus"
    train = write_corpus(corpus / "pretrain" / "train" / "part-0.txt", 300, seed=1)
    dev = write_corpus(corpus / "pretrain" / "dev.txt", 40, seed=2)
    pretrain(tiny_config(train, dev, training__max_steps=5), tmp_path / "pre")
    report = stage.main([
        "--model", str(tmp_path / "pre" / "model-best"), "--corpus", str(corpus), "--output", str(tmp_path / "run"),
        "--device", "cpu", "--config", str(TINY_CFG), "--set", "training.max_steps=30", "--set", "training.eval_frequency=15",
        "--set", "training.batch_size=16", "--parts", str(tmp_path / "out"), "--part-mb", "0.02",
    ])
    assert report["steps"] == 30 and report["after"]["ppl"] < report["before"]["ppl"]
    assert report["overrides"]["training.learning_rate"] == stage.RECIPE["training.learning_rate"]
    pieces = sorted((tmp_path / "out").iterdir())
    assert len(report["parts"]) > 2 and all(p.stat().st_size <= 20_000 for p in pieces)
    stage.main(["--join", str(tmp_path / "out"), "--output", str(tmp_path / "back")])
    for name in ("model-best/model.safetensors", "model-best/softmax.safetensors", "model-best/vocab.txt", "gpu-stage.json"):
        assert (tmp_path / "back" / name).read_bytes() == (tmp_path / "run" / name).read_bytes()
    assert load_native(tmp_path / "back" / "model-best").config == load_native(tmp_path / "pre" / "model-best").config
    assert json.loads((tmp_path / "back" / "gpu-stage.json").read_text())["device"] == "cpu"


def test_a_damaged_piece_is_refused(tmp_path):
    (tmp_path / "run" / "model-best").mkdir(parents=True)
    (tmp_path / "run" / "model-best" / "vocab.txt").write_text("a\nb\n" * 5000, encoding="utf-8")
    stage.pack_parts(tmp_path / "run", tmp_path / "out", 10_000)
    first = tmp_path / "out" / "gpu-stage.tar.part0"
    first.write_bytes(first.read_bytes()[:-1] + b"x")
    with pytest.raises(SystemExit, match="do not add up"):
        stage.join_parts(tmp_path / "out", tmp_path / "back")
    assert not (tmp_path / "back").exists()
