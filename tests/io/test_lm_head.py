"""Language-model heads: the published softmax + vocabulary and our directory's, read into one type."""
import shutil
import zipfile
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch

from spacy_elmo.io import ModelFileError
from spacy_elmo.io import sources
from spacy_elmo.io.lm_head import read_head_vocabulary, read_softmax_hdf5
from spacy_elmo.io.loading import load_lm_head, shipped_model_dir
from spacy_elmo.io.sources import PairSource, PublishedPairSource
from spacy_elmo.io.registry import PUBLISHED_MODELS
from spacy_elmo.training.head import head_vocab
from spacy_elmo.training.model_dir import load_lm_parts

from ..published_head import SPECIALS, WORDS, bilm_tf_reference, write_published_head


def _file_rows(folder: Path, name: str = "tiny_softmax_weights.hdf5"):
    with h5py.File(folder / name, "r") as handle:
        return handle["softmax/W"][...], handle["softmax/b"][...]


def test_a_published_head_keeps_the_files_row_order_and_training_reorders_rows_with_words(tmp_path):
    folder = write_published_head(tmp_path / "pub")
    bilm, head = load_lm_head(folder)
    weight, bias = _file_rows(folder)
    assert head.words == (*SPECIALS, *WORDS) and head.index["</S>"] == 0 and head.index["<S>"] == 1
    assert torch.equal(head.softmax.weight, torch.from_numpy(weight)) and torch.equal(head.softmax.bias, torch.from_numpy(bias))
    assert head.files == (folder / "tiny_softmax_weights.hdf5", folder / "vocab.txt")
    # training's vocabulary puts <S> first: each word keeps its own row, the head follows
    vocab, state = head_vocab(head)
    assert vocab.tokens[:3] == ["<S>", "</S>", "<UNK>"] and list(head.words) == vocab.tokens
    assert state["weight"].data_ptr() == head.softmax.weight.data_ptr()  # reordered in place
    for word in vocab.tokens:
        row = (*SPECIALS, *WORDS).index(word)
        assert torch.equal(state["weight"][vocab.index[word]], torch.from_numpy(weight[row])), word
        assert state["bias"][vocab.index[word]] == bias[row]
    # finetune's loader takes the same head
    _, parts_vocab, parts_state = load_lm_parts(folder)
    assert parts_vocab.tokens == vocab.tokens and torch.equal(parts_state["weight"], state["weight"])


def test_our_directory_and_the_shipped_model_carry_their_head_through_the_same_path():
    bilm, head = load_lm_head()
    _, vocab, state = load_lm_parts()
    assert list(head.words) == vocab.tokens and torch.equal(head.softmax.weight, state["weight"])
    assert head.softmax.weight.shape == (len(vocab), bilm.config.projection_dim)
    assert head.files[0] == shipped_model_dir() / "vocab.txt"


def test_a_zip_of_pair_softmax_and_vocabulary_gives_the_folders_head(tmp_path):
    folder = write_published_head(tmp_path / "pub")
    path = tmp_path / "model.zip"
    with zipfile.ZipFile(path, "w") as archive:
        for file in folder.iterdir():
            archive.write(file, f"inner/{file.name}")  # members in a folder: read by base name
    _, zipped = load_lm_head(path)
    _, plain = load_lm_head(folder)
    assert zipped.words == plain.words and torch.equal(zipped.softmax.weight, plain.softmax.weight)
    assert zipped.files == (path,)


def test_a_pair_without_a_softmax_has_no_head_and_says_so(tmp_path, tiny_paths):
    folder = tmp_path / "pair"
    folder.mkdir()
    for path in tiny_paths:
        shutil.copy(path, folder / path.name)
    assert PairSource(folder / "options.json", folder / "weights.hdf5").head() is None
    with pytest.raises(ModelFileError, match="no softmax with it"):
        load_lm_head(folder)


@pytest.mark.parametrize(
    "damage, message",
    [
        (lambda f: (f / "vocab.txt").write_text("\n".join([*SPECIALS, *WORDS[:-1]]) + "\n"), "do not fit a vocabulary of 14 words"),
        (lambda f: (f / "vocab.txt").write_text("\n".join([*SPECIALS, "cat", "", "dog"]) + "\n"), "line 5 is blank"),
        (lambda f: (f / "vocab.txt").write_text("\n".join([*SPECIALS, "cat", "cat"]) + "\n"), "'cat' on lines 4 and 5"),
        (lambda f: (f / "vocab.txt").write_text("\n".join(["<S>", "</S>", *WORDS, "x"]) + "\n"), "lacks <UNK>"),
        (lambda f: (f / "vocab.txt").unlink(), "no vocabulary beside it"),
        (lambda f: shutil.copy(f / "tiny_softmax_weights.hdf5", f / "other_softmax.hdf5"), "2 files match"),
    ],
)
def test_a_head_that_does_not_fit_its_vocabulary_is_refused_naming_the_file(tmp_path, damage, message):
    folder = write_published_head(tmp_path / "pub")
    damage(folder)
    with pytest.raises(ModelFileError, match=message):
        load_lm_head(folder)


def test_a_head_of_another_width_or_with_bad_values_is_refused(tmp_path):
    folder = write_published_head(tmp_path / "wide", width=32)
    with pytest.raises(ModelFileError, match="width 32, but the biLM's projection_dim is 16") as err:
        load_lm_head(folder)
    assert "tiny_softmax_weights.hdf5" in err.value.path
    folder = write_published_head(tmp_path / "nan")
    with h5py.File(folder / "tiny_softmax_weights.hdf5", "r+") as handle:
        handle["softmax/W"][3, 2] = np.nan
    with pytest.raises(ModelFileError, match="NaN"):
        load_lm_head(folder)
    folder = write_published_head(tmp_path / "nameless")
    with h5py.File(folder / "tiny_softmax_weights.hdf5", "r+") as handle:
        del handle["softmax/b"]
    with pytest.raises(ModelFileError, match="'softmax/b' is missing"):
        load_lm_head(folder)


def test_the_vocabulary_is_read_as_bilm_tf_reads_it(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_text("</S>\n<S>\n  <UNK> \nthe\n!!!MAXTERMID\n,\n\n\n", encoding="utf-8")
    assert read_head_vocabulary(path) == ["</S>", "<S>", "<UNK>", "the", ","]


def test_a_published_name_fetches_its_softmax_and_vocabulary_beside_its_pair(tmp_path, monkeypatch):
    source_folder = write_published_head(tmp_path / "served", softmax_name="softmax.hdf5")
    cache = tmp_path / "cache" / "original"
    cache.mkdir(parents=True)
    for name in ("options.json", "weights.hdf5"):
        shutil.copy(source_folder / name, cache / name)
    asked = []

    def ensure_file(url, target, *, sha256=None, check=None, transfer=None):
        asked.append(url)
        shutil.copy(source_folder / target.name, target)
        check(target)
        return target

    monkeypatch.setattr(sources, "ensure_file", ensure_file)
    head = PublishedPairSource(cache / "options.json", cache / "weights.hdf5", name="original").head()
    base = "https://allennlp.s3.amazonaws.com/models/elmo/"
    assert asked == [
        f"{base}vocab-2016-09-10.txt",
        f"{base}2x4096_512_2048cnn_2xhighway/elmo_2x4096_512_2048cnn_2xhighway_softmax_weights.hdf5",
    ]
    assert head.words == (*SPECIALS, *WORDS)
    assert PUBLISHED_MODELS["original-5.5b"].vocab_url(base) == (
        f"{base}2x4096_512_2048cnn_2xhighway_5.5B/tf_checkpoint/vocab-enwiki-news-500000.txt"
    )
    # a published model without a published softmax asks for nothing
    asked.clear()
    (tmp_path / "x").mkdir()
    assert PublishedPairSource(cache / "options.json", tmp_path / "x" / "weights.hdf5", name="small").head() is None
    assert asked == []


def test_the_head_beside_a_bilm_tf_pair_is_its_checkpoints_softmax_exactly():
    folder, _, arrays = bilm_tf_reference()
    bilm, head = load_lm_head(folder)
    assert torch.equal(head.softmax.weight, torch.from_numpy(arrays["softmax_W"]))
    assert torch.equal(head.softmax.bias, torch.from_numpy(arrays["softmax_b"]))
    assert head.words == tuple(read_head_vocabulary(folder / "vocab.txt")) and len(head) == 32
    assert head.softmax.weight.shape[1] == bilm.config.projection_dim == 6


def test_specials_anywhere_in_the_vocabulary_keep_every_row_with_its_word(tmp_path):
    folder = write_published_head(tmp_path / "pub")
    listed = ["cat", "dog", "<UNK>", "the", "</S>", *[w for w in WORDS if w not in ("cat", "dog", "the")], "<S>"]
    (folder / "vocab.txt").write_text("\n".join(listed) + "\n", encoding="utf-8")
    _, head = load_lm_head(folder)
    weight, _ = _file_rows(folder)
    vocab, state = head_vocab(head)
    assert vocab.tokens == ["<S>", "</S>", "<UNK>", "cat", "dog", "the", *listed[5:-1]]
    for word in vocab.tokens:
        assert torch.equal(state["weight"][vocab.index[word]], torch.from_numpy(weight[listed.index(word)])), word


def test_a_softmax_over_the_cap_on_a_models_size_is_refused_before_it_is_read(tmp_path):
    from spacy_elmo.io.limits import model_bytes_cap

    softmax = write_published_head(tmp_path / "pub") / "tiny_softmax_weights.hdf5"
    words = len(SPECIALS) + len(WORDS)
    with model_bytes_cap(64), pytest.raises(ModelFileError, match=r"the softmax's weights need .* more than the cap") as err:
        read_softmax_hdf5(softmax, words)
    assert err.value.path == str(softmax)
    assert read_softmax_hdf5(softmax, words).weight.shape[0] == words  # under the default cap the same file loads


def test_our_softmax_whose_header_does_not_fit_the_vocabulary_is_refused_naming_it(tmp_path):
    folder = shutil.copytree(shipped_model_dir(), tmp_path / "model")
    words = (folder / "vocab.txt").read_text(encoding="utf-8").splitlines()
    (folder / "vocab.txt").write_text("\n".join(words[:-1]) + "\n", encoding="utf-8")
    with pytest.raises(ModelFileError, match=rf"softmax weight \({len(words)}, \d+\) does not match vocab.txt") as err:
        load_lm_head(folder)
    assert err.value.path.endswith("softmax.safetensors")
