"""A download that fails (refused, cut off, altered, interrupted) leaves nothing behind in the cache:
no partial file, and no folder made for it that stayed empty."""
import hashlib
import io
from dataclasses import replace

import pytest

from spacy_elmo.io.download import Transfer, fetch_pair, fetch_published
from spacy_elmo.io.errors import DownloadError

from .test_download import FAST, OPTIONS, OPTIONS_PATH, SMALL, WEIGHTS, WEIGHTS_PATH, server  # noqa: F401 (fixture)

pytestmark = pytest.mark.filterwarnings("ignore:.*downloading over plain http:RuntimeWarning")


class _InterruptedStream(io.StringIO):
    """Where the progress line goes, pressed Ctrl-C at: the download stops mid-file."""

    def write(self, text: str) -> int:
        raise KeyboardInterrupt


def _left(folder):
    return sorted(path.relative_to(folder).as_posix() for path in folder.rglob("*")) if folder.exists() else None


def test_a_refused_download_leaves_no_folder_behind(server, tmp_path):  # noqa: F811
    with pytest.raises(DownloadError, match="HTTP 404"):
        fetch_published("small", transfer=Transfer(**FAST))
    assert not (tmp_path / "cache").exists()  # the cache and the model's folder were made for it
    with pytest.raises(DownloadError, match="HTTP 404"):
        fetch_pair(server.base + "a/o.json", server.base + "a/w.hdf5", tmp_path / "cache" / "urls" / "0123")
    assert not (tmp_path / "cache").exists()


def test_a_folder_that_was_there_before_stays(server, tmp_path):  # noqa: F811
    (tmp_path / "mine").mkdir()
    with pytest.raises(DownloadError, match="HTTP 404"):
        fetch_published("small", directory=tmp_path / "mine", transfer=Transfer(**FAST))
    assert _left(tmp_path / "mine") == []


def test_an_interrupted_download_leaves_nothing(server, tmp_path):  # noqa: F811
    server.publish_small()
    with pytest.raises(KeyboardInterrupt):
        fetch_published("small", transfer=Transfer(**FAST, progress=_InterruptedStream()))
    assert server.count(OPTIONS_PATH) == 1 and not (tmp_path / "cache").exists()


def test_connection_that_keeps_dropping_gives_up_after_the_retries(server, tmp_path):  # noqa: F811
    server.publish_small()
    server.always[WEIGHTS_PATH] = "drop"
    with pytest.raises(DownloadError, match=r"gave up after 4 attempts.*nothing was put in place"):
        fetch_published("small", transfer=Transfer(**FAST))
    assert server.count(WEIGHTS_PATH) == 4
    # the options arrived whole and verified, and stay; of the weights nothing does, not even a part
    assert _left(tmp_path / "cache") == ["small", "small/options.json", "small/options.json.sha256.json"]


def test_truncated_file_is_refused_and_never_put_in_place(server, tmp_path):  # noqa: F811
    server.publish_small()
    server.always[WEIGHTS_PATH] = "truncate"
    with pytest.raises(DownloadError, match=r"weights.hdf5: the file received is not usable.*HDF5") as err:
        fetch_published("small", transfer=Transfer(**FAST))
    assert err.value.url == server.base + WEIGHTS_PATH
    assert list((tmp_path / "cache" / "small").glob("weights*")) == []


def test_an_altered_file_fails_the_known_checksum_and_leaves_nothing(server, tmp_path):  # noqa: F811
    server.publish_small()
    known = {"small": replace(SMALL, options_sha256=hashlib.sha256(OPTIONS).hexdigest(),
                              weights_sha256=hashlib.sha256(WEIGHTS).hexdigest())}
    server.always[OPTIONS_PATH] = "alter"
    with pytest.raises(DownloadError, match="not the published"):
        fetch_published("small", models=known, transfer=Transfer(**FAST))
    assert not (tmp_path / "cache").exists()  # the options come first: nothing else was there
    server.always = {WEIGHTS_PATH: "alter"}
    with pytest.raises(DownloadError, match="not the published"):
        fetch_published("small", models=known, transfer=Transfer(**FAST))
    assert _left(tmp_path / "cache" / "small") == ["options.json", "options.json.sha256.json"]
    server.always.clear()
    assert fetch_published("small", models=known, transfer=Transfer(**FAST))[1].read_bytes() == WEIGHTS
