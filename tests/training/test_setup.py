import io
import warnings

import pytest

from spacy_elmo.fast import precision as quantize
from spacy_elmo.training.distributed import DistInfo
from spacy_elmo.training.setup import check_output, dev_reader, has_checkpoints, logger, make_output, setup_process

from .conftest import tiny_config, write_corpus


def test_a_new_run_refuses_a_directory_with_checkpoints_but_a_resumed_one_does_not(tmp_path):
    check_output(tmp_path / "new", resume=False)
    make_output(tmp_path / "new", DistInfo())
    assert (tmp_path / "new").is_dir() and not has_checkpoints(tmp_path / "new")
    (tmp_path / "new" / "checkpoints" / "step-00000001").mkdir(parents=True)
    assert has_checkpoints(tmp_path / "new")
    with pytest.raises(FileExistsError, match="--resume"):
        check_output(tmp_path / "new", resume=False)
    check_output(tmp_path / "new", resume=True)


def test_a_run_without_a_held_out_text_is_warned_at_its_start_what_model_best_is(tmp_path):
    from spacy_elmo.training.pretrain import pretrain

    train = write_corpus(tmp_path / "train.txt", 40)
    said = []
    assert dev_reader(tiny_config(train), log=said.append, without="; and more") is None
    assert said == ["warning: no held-out text ([paths] dev, --paths.dev): model-best will be the last model, not one "
                    "chosen by held-out perplexity; and more"]
    stream = io.StringIO()
    pretrain(tiny_config(train, training__max_steps=1), tmp_path / "pre", stream=stream)
    assert "warning: no held-out text ([paths] dev, --paths.dev): model-best will be the last model" in stream.getvalue()
    said = []
    dev_reader(tiny_config(train, write_corpus(tmp_path / "dev.txt", 5)), log=said.append)
    assert not any("no held-out text" in line for line in said)


def test_the_dev_reader_streams_the_same_capped_segments_every_time(tmp_path):
    train = write_corpus(tmp_path / "train.txt", 5)
    assert dev_reader(tiny_config(train)) is None
    dev = write_corpus(tmp_path / "dev.txt", 20, seed=2)
    read = dev_reader(tiny_config(train, dev, corpus__dev_max_segments=7))
    first = list(read())
    assert len(first) == 7 and list(read()) == first


def test_only_the_main_rank_logs():
    stream = io.StringIO()
    logger(DistInfo(), stream)("main")
    logger(DistInfo(rank=1, world_size=2), stream)("other")
    assert stream.getvalue() == "main\n"


def test_bf16_training_on_a_cpu_without_bf16_arithmetic_warns_and_fp32_or_bf16_hardware_does_not(
    tmp_path, monkeypatch
):
    monkeypatch.setenv("SPACY_ELMO_MALLOC", "0")  # leave the test process's allocator as it is
    train = write_corpus(tmp_path / "train.txt", 5)
    bf16, fp32 = tiny_config(train, training__autocast="bf16"), tiny_config(train)
    monkeypatch.setattr(quantize, "cpu_has_bf16", lambda: False)
    with pytest.warns(RuntimeWarning, match=r'needs a CPU with bf16 arithmetic.*training.autocast = "off"'):
        setup_process(bf16, "cpu")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        setup_process(fp32, "cpu")
        monkeypatch.setattr(quantize, "cpu_has_bf16", lambda: True)
        setup_process(bf16, "cpu")
