"""`substitutes`: one JSON line per token with the forward, backward and combined top words."""
import json
import zipfile

from typer.testing import CliRunner

from spacy_elmo.cli import app
from spacy_elmo.io.loading import load_lm_head
from spacy_elmo.usage.substitutes import sentence_substitutes

from ..published_head import BILM_TF, write_published_head


def test_substitutes_prints_a_json_line_per_token_from_the_models_softmax_words_only_by_default(tmp_path):
    model = write_published_head(tmp_path / "pub")
    result = CliRunner().invoke(app, ["substitutes", "the cat sees a zebra.", "--model", str(model), "--top", "3"])
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [line["token"] for line in lines] == ["the", "cat", "sees", "a", "zebra", "."]
    bilm, head = load_lm_head(model)
    [expected] = sentence_substitutes(bilm, head, [["the", "cat", "sees", "a", "zebra", "."]], top=3, exclude=["<S>", "</S>", "<UNK>"])
    for line, token in zip(lines, expected):
        assert line["position"] == token.position
        for name in ("forward", "backward", "combined"):
            assert [s["word"] for s in line[name]] == [s.word for s in getattr(token, name)]
            probs = [s["prob"] for s in line[name]]
            assert probs == sorted(probs, reverse=True) and all(0 < p <= 1 for p in probs)
            assert "<UNK>" not in [s["word"] for s in line[name]]


def test_substitutes_of_a_model_without_a_softmax_is_refused(tmp_path, tiny_paths):
    bare = tmp_path / "bare"
    bare.mkdir()
    for path in tiny_paths:
        (bare / path.name).write_bytes(path.read_bytes())
    result = CliRunner().invoke(app, ["substitutes", "a cat", "--model", str(bare)])
    said = " ".join(result.output.replace("│", " ").split())
    assert result.exit_code == 2 and "no softmax with it" in said


def test_an_nlpl_zip_and_its_files_unpacked_give_the_same_substitutes_from_the_checkpoints_softmax(tmp_path):
    zipped = BILM_TF / "nlpl_full.zip"
    folder = tmp_path / "nlpl"
    with zipfile.ZipFile(zipped) as archive:
        archive.extractall(folder)
    printed = {}
    for name, model in (("zip", zipped), ("folder", folder)):
        result = CliRunner().invoke(app, ["substitutes", "the cat ran to the bank .", "--model", str(model)])
        assert result.exit_code == 0, result.output
        printed[name] = result.stdout
    assert printed["zip"] == printed["folder"]
    lines = [json.loads(line) for line in printed["zip"].splitlines()]
    assert [line["token"] for line in lines] == ["the", "cat", "ran", "to", "the", "bank", "."]
    words = set((BILM_TF / "vocab.txt").read_text(encoding="utf-8").split())
    assert all(s["word"] in words for line in lines for s in line["combined"])


def _listed(result, name="combined"):
    assert result.exit_code == 0, result.output
    return [{s["word"] for s in json.loads(line)[name]} for line in result.stdout.splitlines()]


def test_substitutes_offers_boundaries_and_every_entry_only_when_asked(tmp_path):
    model = write_published_head(tmp_path / "pub")
    every = ["substitutes", "the cat sees a zebra .", "--model", str(model), "--top", "15"]
    words = _listed(CliRunner().invoke(app, every))
    assert all(not ({"<S>", "</S>", "<UNK>"} & listed) for listed in words)
    with_boundaries = _listed(CliRunner().invoke(app, [*every, "--include-boundaries"]), "forward")
    assert any("</S>" in listed for listed in with_boundaries)
    all_entries = _listed(CliRunner().invoke(app, [*every, "--all-entries"]))
    assert any("<UNK>" in listed for listed in all_entries)
    assert any("</S>" in listed for listed in _listed(CliRunner().invoke(app, [*every, "--all-entries"]), "forward"))


def test_substitutes_still_takes_exclude_unk_with_a_note_that_it_is_the_default(tmp_path):
    model = write_published_head(tmp_path / "pub")
    result = CliRunner().invoke(app, ["substitutes", "the cat", "--model", str(model), "--exclude-unk"])
    assert result.exit_code == 0 and "--exclude-unk is no longer needed" in result.output
    assert all("<UNK>" not in listed for listed in _listed(result))
