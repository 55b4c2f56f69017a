from spacy_elmo.io import save_bilm

from lab.records.gather import gathered, model_files

from ...conftest import random_bilm
from .test_check import complete_record


def test_gathered_lists_each_model_once_and_unites_the_data():
    elmo = complete_record()["provenance"]
    plain = {**elmo, "model": None, "model_note": "no biLM", "data": {"x.spacy": "d" * 64}}
    fields = gathered([elmo, plain, elmo])
    assert fields["model"] == [elmo["model"]] and fields["model_note"] == "no biLM"
    assert fields["data"] == {**elmo["data"], "x.spacy": "d" * 64}
    assert "model" not in gathered([elmo, {"command": "old"}])


def test_model_files_names_every_file_of_a_model_directory_by_its_digest(tmp_path):
    save_bilm(random_bilm(), tmp_path / "bilm")
    (tmp_path / "bilm" / "extra").mkdir()
    (tmp_path / "bilm" / "extra" / "note.txt").write_text("x", encoding="utf-8")
    files = model_files(tmp_path / "bilm")
    assert files["path"] == f".../{tmp_path.parent.name}/{tmp_path.name}/bilm"
    assert files["sha256"]["extra/note.txt"] == "2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881"
    assert set(files["sha256"]) == {p.relative_to(tmp_path / "bilm").as_posix() for p in (tmp_path / "bilm").rglob("*") if p.is_file()}
