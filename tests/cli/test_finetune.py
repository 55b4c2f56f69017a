"""The `finetune` command's summary: what each before/after figure it prints is measured over."""
import json

from typer.testing import CliRunner

from spacy_elmo.cli import app

from ..training.conftest import TINY_CFG, write_corpus

runner = CliRunner()


def test_finetune_summary_says_the_general_figures_are_over_the_shared_vocabulary(tmp_path):
    train = write_corpus(tmp_path / "train.txt", 200, seed=1)
    dev = write_corpus(tmp_path / "dev.txt", 30, seed=2)
    general = write_corpus(tmp_path / "general.txt", 30, seed=3)
    pre = tmp_path / "pre"
    result = runner.invoke(app, ["pretrain", str(TINY_CFG), "--output", str(pre), "--paths.train", str(train),
                                 "--training.max_steps", "4"])
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["finetune", str(TINY_CFG), "--model", str(pre / "model-last"), "--output", str(tmp_path / "ft"),
                                 "--paths.train", str(dev), "--paths.dev", str(dev), "--finetune.general", str(general),
                                 "--training.max_steps", "2"])
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "ft" / "finetune-report.json").read_text())["general"]
    # a start with its softmax is scored over the shared vocabulary as well; the summary names which figure it gives
    assert report["ratio_of"] == "ppl_shared"
    before, after = report["before"]["ppl_shared"], report["after"]["ppl_shared"]
    assert f"general held-out perplexity over the shared vocabulary {before:.2f} -> {after:.2f}" in result.output
