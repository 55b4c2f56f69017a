"""`evaluate` on a published model with its own softmax: fresh and carried state, the record it
writes; a bilm-tf checkpoint folder, and an NLPL zip against the same files unpacked."""
import json
import zipfile

import numpy as np
import pytest
from typer.testing import CliRunner

from spacy_elmo.cli import app
from spacy_elmo.files import file_sha256
from spacy_elmo.records.provenance import portable_path
from spacy_elmo.training.head import load_scoring_lm
from spacy_elmo.training.perplexity import evaluate_perplexity

from ..published_head import BILM_TF, bilm_tf_reference, write_published_head

LINES = ["the cat sees a bird .", "a big dog likes fish", "red zebra"]


def _evaluate(*args):
    return CliRunner().invoke(app, ["evaluate", *args])


def _said(result) -> str:
    """The output with the error box's frame and line breaks taken out."""
    return " ".join(result.output.replace("│", " ").split())


def test_evaluate_scores_a_published_model_with_its_softmax_fresh_and_carried(tmp_path):
    model = write_published_head(tmp_path / "pub")
    data = tmp_path / "dev.txt"
    data.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    records = {}
    for state, extra in (("fresh", []), ("carried", ["--carry-state", "--chunk-size", "4"])):
        out = tmp_path / f"{state}.json"
        result = _evaluate("--model", str(model), "--input", str(data), "--output", str(out), *extra)
        assert result.exit_code == 0, result.output
        records[state] = json.loads(out.read_text())
        assert f"{state} state" in result.output
        record = json.loads(out.read_text())
        printed = f"perplexity {record['ppl']:.4g} (forward {record['forward_ppl']:.4g}, backward {record['backward_ppl']:.4g})"
        assert printed in result.output
    lm, vocab, _ = load_scoring_lm(model)
    sentences = [line.split() for line in LINES]
    for state, record in records.items():
        expected = evaluate_perplexity(lm, sentences, vocab, carry_state=state == "carried")
        assert record["state"] == state and record["vocab_size"] == 15 and record["tokens"] == 16
        assert record["forward_ppl"] == pytest.approx(expected.forward, rel=1e-5)
        assert record["backward_ppl"] == pytest.approx(expected.backward, rel=1e-5)
        assert record["ppl"] == pytest.approx(expected.mean, rel=1e-5)
        assert record["peak_rss_mb"] > 0 and record["max_sentence_tokens"] is None
        assert len(record["head"]) == 2 and all(len(digest) == 64 for digest in record["head"].values())
        assert record["provenance"]["model"]["weights_sha256"]
    assert records["fresh"]["ppl"] != pytest.approx(records["carried"]["ppl"], rel=1e-3)


def test_evaluate_refuses_a_model_without_a_softmax_and_a_head_of_another_model(tmp_path, tiny_paths):
    data = tmp_path / "dev.txt"
    data.write_text("the cat\n", encoding="utf-8")
    bare = tmp_path / "bare"
    bare.mkdir()
    for path in tiny_paths:
        (bare / path.name).write_bytes(path.read_bytes())
    result = _evaluate("--model", str(bare), "--input", str(data))
    assert result.exit_code == 2 and "no softmax with it" in _said(result)
    wide = write_published_head(tmp_path / "wide", width=32)
    result = _evaluate("--model", str(wide), "--data", str(data))
    assert result.exit_code == 2 and "projection_dim is 16" in _said(result)


def _bilm_tf_dev(tmp_path):
    """The bilm-tf fixture's held-out sentences as a text file, and the perplexity bilm-tf's own
    graph gives them from a fresh state (tests/data/bilm_tf/README.md)."""
    _, reference, _ = bilm_tf_reference()
    data = tmp_path / "dev.txt"
    data.write_text("\n".join(reference["sentences"]) + "\n", encoding="utf-8")
    fresh = reference["token_nll"]["fresh"]
    nll = 0.5 * (np.array(fresh["forward"]) + np.array(fresh["backward"]))
    return data, float(np.exp(nll.mean()))


def test_evaluate_a_bilm_tf_checkpoint_folder_writes_its_report_with_the_checkpoints_files(tmp_path):
    folder = BILM_TF / "checkpoint_folder"
    data, expected = _bilm_tf_dev(tmp_path)
    out = tmp_path / "report.json"
    result = _evaluate("--model", str(folder), "--input", str(data), "--output", str(out))
    assert result.exit_code == 0, result.output
    record = json.loads(out.read_text())
    assert record["ppl"] == pytest.approx(expected, rel=1e-4) and record["max_sentence_tokens"] is None
    # the head's digests are of files: the checkpoint's shard and index and the vocabulary beside them
    named = {path.rsplit("/", 1)[-1]: digest for path, digest in record["head"].items()}
    assert named == {name: file_sha256(folder / name) for name in (
        "model.ckpt-24.data-00000-of-00001", "model.ckpt-24.index", "vocab.txt")}
    model = record["provenance"]["model"]
    assert model["weights"].endswith("checkpoint_folder/model.ckpt-24.data-00000-of-00001")
    assert model["weights_sha256"] == file_sha256(folder / "model.ckpt-24.data-00000-of-00001")


def test_an_nlpl_zip_and_its_files_unpacked_score_the_same_with_the_checkpoints_softmax(tmp_path):
    """NLPL's "full" zip keeps the softmax in the bilm-tf checkpoint beside model.hdf5: the zip and
    the folder it unpacks to give bilm-tf's perplexity, equal to the last bit."""
    zipped = BILM_TF / "nlpl_full.zip"
    folder = tmp_path / "nlpl"
    with zipfile.ZipFile(zipped) as archive:
        archive.extractall(folder)
    data, expected = _bilm_tf_dev(tmp_path)
    records = {}
    for name, model in (("zip", zipped), ("folder", folder)):
        out = tmp_path / f"{name}.json"
        result = _evaluate("--model", str(model), "--input", str(data), "--output", str(out))
        assert result.exit_code == 0, result.output
        records[name] = json.loads(out.read_text())
    for key in ("ppl", "forward_ppl", "backward_ppl", "tokens", "oov_rate", "vocab_size"):
        assert records["zip"][key] == records["folder"][key], key
    assert records["zip"]["ppl"] == pytest.approx(expected, rel=1e-4)
    assert list(records["zip"]["head"]) == [portable_path(zipped)]


def test_evaluate_refuses_nothing_to_score_in_one_line_never_perplexity_one(tmp_path):
    model = write_published_head(tmp_path / "pub")
    empty, blank = tmp_path / "empty.txt", tmp_path / "blank.txt"
    empty.write_text("", encoding="utf-8")
    blank.write_text("\n   \n\n", encoding="utf-8")
    for data in (empty, blank):
        result = _evaluate("--model", str(model), "--input", str(data))
        assert result.exit_code == 2 and "no tokens to score" in _said(result)
        assert "perplexity" not in result.output


def test_evaluate_refuses_lines_all_too_long_or_all_undecodable_and_writes_no_record(tmp_path):
    model = write_published_head(tmp_path / "pub")
    long, latin = tmp_path / "long.txt", tmp_path / "latin.txt"
    long.write_text("the cat " * 20000 + "\n", encoding="utf-8")  # one line, no sentence break
    latin.write_bytes("caf\xe9 na\xefve .\n\xe0 la carte\n".encode("latin-1"))
    record = tmp_path / "out.json"
    result = _evaluate("--model", str(model), "--input", str(long), "--output", str(record))
    assert result.exit_code == 2 and "1 too_long" in _said(result) and "split them, one sentence a line" in _said(result)
    result = _evaluate("--model", str(model), "--input", str(latin), "--output", str(record))
    assert result.exit_code == 2 and "every line held bytes that are not UTF-8 (the first: latin.txt:1)" in _said(result)
    assert "perplexity" not in result.output and not record.exists()


def test_evaluate_refuses_a_binary_file_and_names_undecodable_lines_or_refuses_them(tmp_path):
    model = write_published_head(tmp_path / "pub")
    binary = tmp_path / "program"
    binary.write_bytes(b"\x7fELF\x02\x01\x01\x00" * 64)
    result = _evaluate("--model", str(model), "--input", str(binary))
    assert result.exit_code == 2 and "a binary file, not text" in _said(result)
    latin = tmp_path / "latin.txt"
    latin.write_bytes("the cat sees a bird .\nthe caf\xe9 .\n".encode("latin-1"))
    record = tmp_path / "out.json"
    result = _evaluate("--model", str(model), "--input", str(latin), "--output", str(record))
    assert result.exit_code == 0, result.output
    assert "1 lines with bytes that are not UTF-8" in result.output and "latin.txt:2" in result.output
    assert json.loads(record.read_text())["corpus"]["undecodable"] == 1
    result = _evaluate("--model", str(model), "--input", str(latin), "--strict-utf8")
    assert result.exit_code == 2 and "latin.txt:2: byte 7 is not UTF-8" in _said(result)


def test_evaluate_reads_the_old_spellings_with_a_deprecation_warning(tmp_path):
    model = write_published_head(tmp_path / "pub")
    data = tmp_path / "dev.txt"
    data.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    result = _evaluate("--model", str(model), "--data", str(data), "--format", "txt")
    assert result.exit_code == 0, result.output
    assert "--data is now --input" in result.output and "--format is now --input-format" in result.output
    assert "over 16 tokens" in result.output


def test_evaluate_takes_a_published_pair_as_options_and_weights(tmp_path):
    model = write_published_head(tmp_path / "pub")
    data = tmp_path / "dev.txt"
    data.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    by_folder = _evaluate("--model", str(model), "--input", str(data))
    by_pair = _evaluate("--options", str(model / "options.json"), "--weights", str(model / "weights.hdf5"), "--input", str(data))
    assert by_pair.exit_code == 0, by_pair.output
    assert by_pair.output.split(";")[0] == by_folder.output.split(";")[0]


def test_evaluate_gives_no_perplexity_for_a_text_wholly_out_of_vocabulary_and_warns_at_ten_percent(tmp_path):
    model = write_published_head(tmp_path / "pub", words=["the", "cat", "sees", "a", "bird", "."])
    foreign, mixed = tmp_path / "foreign.txt", tmp_path / "mixed.txt"
    foreign.write_text("zebra quagga okapi\ngnu yak\n", encoding="utf-8")
    mixed.write_text("the cat sees a zebra .\n", encoding="utf-8")  # 1 token in 6 outside
    record = tmp_path / "out.json"
    result = _evaluate("--model", str(model), "--input", str(foreign), "--output", str(record))
    assert result.exit_code == 2 and "all 5 tokens are outside the model's vocabulary" in _said(result)
    assert "perplexity" not in result.output.split("all 5 tokens")[0] and not record.exists()
    result = _evaluate("--model", str(model), "--input", str(mixed), "--output", str(record))
    assert result.exit_code == 0, result.output
    assert "16.7% of its tokens are outside the vocabulary (>= 10%)" in _said(result)
    warning = json.loads(record.read_text())["warnings"][0]
    assert warning.startswith("warning: ") and "mixed.txt" in warning and str(tmp_path) not in warning  # portable


def test_evaluate_tokenizes_raw_text_with_spacy_and_says_so(tmp_path):
    model = write_published_head(tmp_path / "pub", words=["the", "cat", "sees", "a", "bird", ",", ".", "Hello"])
    raw = tmp_path / "raw.txt"
    raw.write_text("Hello, the cat sees a bird.\n", encoding="utf-8")
    record = tmp_path / "out.json"
    result = _evaluate("--model", str(model), "--input", str(raw), "--lang", "en", "--output", str(record))
    assert result.exit_code == 0, result.output
    numbers = json.loads(record.read_text())
    assert numbers["tokenizer"] == "en" and numbers["oov_rate"] == 0.0 and numbers["tokens"] == 9
    assert "spaCy's 'en' tokenizer: the text reads as raw" in _said(result)
    result = _evaluate("--model", str(model), "--input", str(raw), "--tokenizer", "whitespace", "--output", str(record))
    assert json.loads(record.read_text())["oov_rate"] == pytest.approx(2 / 6)  # "Hello," and "bird." are not words


def test_evaluate_reads_raw_text_wrapped_across_lines_as_finetune_does(tmp_path):
    """Wrapped raw text: its lines joined and split into sentences (as training's [corpus] sentences
    auto reads it), not each fragment of a line scored as a sentence; --sentences lines keeps lines."""
    model = write_published_head(tmp_path / "pub", words=["the", "cat", "sees", "a", "bird", "and", "dog", "."])
    wrapped = tmp_path / "wrapped.txt"
    wrapped.write_text("The cat sees a bird and\na dog. The dog sees\nthe cat and a bird.\n" * 6, encoding="utf-8")
    record = tmp_path / "out.json"
    result = _evaluate("--model", str(model), "--input", str(wrapped), "--lang", "en", "--output", str(record))
    assert result.exit_code == 0, result.output
    joined = json.loads(record.read_text())
    assert "wrapped lines" in joined["tokenizer_note"] and "sentencizer" in joined["tokenizer_note"]
    assert joined["corpus"]["segments"] == 12  # two sentences a paragraph of three lines
    result = _evaluate("--model", str(model), "--input", str(wrapped), "--lang", "en", "--sentences", "lines",
                       "--output", str(record))
    assert result.exit_code == 0, result.output
    assert json.loads(record.read_text())["corpus"]["segments"] == 18  # each line scored as a sentence
