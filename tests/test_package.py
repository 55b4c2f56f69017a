"""`spacy package` of a trained elmo + tagger pipeline, installed into a fresh venv and run on text."""
import pytest

from .training_runs import CONFIGS, make_data, script, train


@pytest.mark.slow
def test_wheel_installs_into_a_fresh_venv_and_tags_text(tmp_path):
    data = make_data(tmp_path / "data")
    nlp = train(CONFIGS / "tagger-elmo.cfg", data, tmp_path / "training")
    expected = [t.tag_ for t in nlp("The bank by the river was closed .")]
    package = script("package_pipeline")
    pipeline = tmp_path / "training" / "model-last"
    wheel = package.build_wheel(pipeline, tmp_path / "packages", name="test_elmo_tagger", version="0.0.1")
    assert wheel.name.startswith("en_test_elmo_tagger-0.0.1-")
    result = package.check_in_fresh_venv(wheel, "The bank by the river was closed .", workdir=tmp_path)
    assert result["pipeline"] == ["elmo", "tagger"]
    assert result["tokens"] == ["The", "bank", "by", "the", "river", "was", "closed", "."]
    # the installed copy gives the trained pipeline's tags, with the biLM's layers on the Doc
    assert result["tags"] == expected
    assert result["elmo_shape"] == [3, 8, 32]
