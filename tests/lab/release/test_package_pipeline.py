"""`spacy package` of trained elmo + tagger and elmo + textcat pipelines, installed with spacy-elmo's
own (platform) wheel into a fresh venv (no network, nothing from the base interpreter or the
checkout) and run on text with no compiler reachable."""
from pathlib import Path

import pytest

import spacy_elmo

from lab.release import package_pipeline as package

from ...training_runs import CONFIGS, ROOT, make_data, make_textcat_data, train


@pytest.mark.slow
def test_wheel_installs_into_a_fresh_venv_and_tags_text(tmp_path):
    data = make_data(tmp_path / "data")
    nlp = train(CONFIGS / "tagger-elmo.cfg", data, tmp_path / "training")
    expected = [t.tag_ for t in nlp("The bank by the river was closed .")]
    pipeline = tmp_path / "training" / "model-last"
    wheel = package.build_wheel(pipeline, tmp_path / "packages", name="test_elmo_tagger", version="0.0.1")
    assert wheel.name.startswith("en_test_elmo_tagger-0.0.1-")
    elmo_wheel = package.build_spacy_elmo_wheel(tmp_path / "elmo-dist")
    assert elmo_wheel.name.startswith(f"spacy_elmo-{spacy_elmo.__version__}-")
    result = package.check_in_fresh_venv(
        wheel, "The bank by the river was closed .", workdir=tmp_path, spacy_elmo_wheel=elmo_wheel
    )
    # both packages come from the wheels installed into the venv (paths relative to it)
    assert result["package_path"].startswith("lib/") and result["spacy_elmo_path"].startswith("lib/")
    assert result["spacy_elmo_path"].endswith("site-packages/spacy_elmo/__init__.py")
    assert result["unmet_requirements"] == []
    assert result["pipeline"] == ["elmo", "tagger"]
    assert result["tokens"] == ["The", "bank", "by", "the", "river", "was", "closed", "."]
    # the installed copy gives the trained pipeline's tags, with the biLM's layers on the Doc
    assert result["tags"] == expected
    assert result["elmo_shape"] == [3, 8, 32]
    # with no compiler reachable and a fresh cache, the wheel's prebuilt kernels ran
    assert result["kernels"]["compiler"] is None and result["kernels"]["source"] == "prebuilt"


def test_fresh_venv_sees_the_running_environment_not_the_base_interpreter():
    # a venv made with --system-site-packages from a venv's python sees the base interpreter's
    # packages; the check hands the fresh venv this environment's site-packages instead
    paths = package.environment_paths()
    import spacy

    assert any(Path(spacy.__file__).resolve().is_relative_to(p) for p in paths), paths
    assert str(ROOT.resolve()) not in paths
    assert "--system-site-packages" not in Path(package.__file__).read_text(encoding="utf-8")


def test_spacy_elmo_wheel_builds_from_a_copy_and_holds_the_shipped_model(tmp_path):
    import zipfile

    had_build = (ROOT / "build").exists()
    wheel = package.build_spacy_elmo_wheel(tmp_path)
    names = zipfile.ZipFile(wheel).namelist()
    assert "spacy_elmo/models/en_small/model.safetensors" in names
    assert "spacy_elmo/models/en_small/config.json" in names
    assert not any(n.startswith("tests/") for n in names)
    assert (ROOT / "build").exists() == had_build  # built from a copy: the checkout gets no build/


@pytest.mark.slow
def test_textcat_wheel_classifies_text_as_the_trained_pipeline_does(tmp_path):
    data = make_textcat_data(tmp_path / "data")
    nlp = train(CONFIGS / "textcat-elmo.cfg", data, tmp_path / "training")
    text = "We saw it on Sunday. The film was wonderful."
    pipeline = tmp_path / "training" / "model-last"
    wheel = package.build_wheel(pipeline, tmp_path / "packages", name="test_textcat", version="0.0.1")
    result = package.check_in_fresh_venv(wheel, text, workdir=tmp_path)
    assert result["pipeline"] == ["sentencizer", "elmo", "textcat"]
    assert result["cats"] == pytest.approx(nlp(text).cats, abs=1e-6)
    assert result["elmo_shape"] == [3, 11, 32]
