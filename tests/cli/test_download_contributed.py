"""`download` and `convert` of contributed models: SeqVec's files but no pipeline (protein residues
are no language's words), a contributed language model's pipeline in its language."""
import spacy
from spacy.tokens import Doc
from typer.testing import CliRunner

import numpy as np
import pytest

from spacy_elmo.cli import app
from spacy_elmo.io import load_allennlp
from spacy_elmo.io.registry import PUBLISHED_CONTRIBUTED

from ..io.test_download_contributed import OPTIONS, SEQVEC, WEIGHTS, contributed, published_archive  # noqa: F401

pytestmark = pytest.mark.filterwarnings("ignore:.*downloading over plain http:RuntimeWarning")
runner = CliRunner()


def test_download_seqvec_by_name_writes_the_pair_and_refuses_a_pipeline_before_downloading(
    contributed, tmp_path  # noqa: F811
):
    contributed.files["seqvec.zip"] = published_archive("seqvec")
    result = runner.invoke(app, ["download", "seqvec", "--as-pipeline", "--output", str(tmp_path / "p"), "--lang", "xx"])
    assert result.exit_code == 1 and "residues" in result.output and "load_bilm('seqvec')" in result.output
    assert contributed.count("seqvec.zip") == 0 and not (tmp_path / "p").exists()
    result = runner.invoke(app, ["download", "seqvec", "--output", str(tmp_path / "files")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "files" / "weights.hdf5").read_bytes() == WEIGHTS
    assert (tmp_path / "files" / "options.json").read_bytes() == OPTIONS
    # convert refuses it by name (before any download) and as the folder download wrote
    for model in ("seqvec", str(tmp_path / "files")):
        result = runner.invoke(app, ["convert", "--model", model, "--output", str(tmp_path / "c")])
        assert result.exit_code == 1 and "residues" in result.output, result.output
    assert contributed.count("seqvec.zip") == 1 and not (tmp_path / "c").exists()


def test_download_a_contributed_pipeline_gets_the_models_language(contributed, tmp_path):  # noqa: F811
    model = PUBLISHED_CONTRIBUTED["pt-brwac"]
    contributed.files.update({model.options_path: OPTIONS, model.weights_path: WEIGHTS})
    out = tmp_path / "pt_elmo"
    result = runner.invoke(app, ["download", "pt-brwac", "--as-pipeline", "--output", str(out)])
    assert result.exit_code == 0, result.output
    nlp = spacy.load(out)
    assert nlp.lang == "pt" and nlp.pipe_names == ["elmo"]
    words = ["Ela", "foi", "ao", "banco"]
    doc = nlp(Doc(nlp.vocab, words=words))
    expected = load_allennlp(SEQVEC / "options.json", SEQVEC / "weights.hdf5").embed([words])[0]
    np.testing.assert_allclose(doc._.elmo.layers, expected, atol=1e-5)
