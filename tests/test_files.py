from spacy_elmo.files import cache_dir
from spacy_elmo.fast import kernel_library


def test_cache_dir_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("SPACY_ELMO_CACHE", str(tmp_path / "mine"))
    assert cache_dir() == tmp_path / "mine"
    monkeypatch.delenv("SPACY_ELMO_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "spacy_elmo"


def test_built_kernels_go_in_the_cache_folder_unless_given_their_own(monkeypatch, tmp_path):
    monkeypatch.delenv(kernel_library.DIR_ENV, raising=False)
    monkeypatch.setenv("SPACY_ELMO_CACHE", str(tmp_path / "cache"))
    assert kernel_library.kernel_dir() == cache_dir() / "kernels"
    monkeypatch.setenv(kernel_library.DIR_ENV, str(tmp_path / "kernels"))
    assert kernel_library.kernel_dir() == tmp_path / "kernels"
