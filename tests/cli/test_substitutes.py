"""`substitutes`: one JSON line per token with the forward, backward and combined top words."""
import json

from typer.testing import CliRunner

from spacy_elmo.cli import app
from spacy_elmo.io.lm_head import load_lm_head
from spacy_elmo.usage.substitutes import sentence_substitutes

from ..published_head import write_published_head


def test_substitutes_prints_a_json_line_per_token_from_the_models_softmax(tmp_path):
    model = write_published_head(tmp_path / "pub")
    result = CliRunner().invoke(app, ["substitutes", "the cat sees a zebra.", "--model", str(model), "--top", "3",
                                      "--exclude-unk"])
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
