"""The one folder spacy-elmo caches in: downloaded models (``io/download.py``) and built kernels
(``fast/compiled.py``, in its ``kernels/``)."""
import os
from pathlib import Path

CACHE_ENV = "SPACY_ELMO_CACHE"


def cache_dir() -> Path:
    """``$SPACY_ELMO_CACHE``, else ``$XDG_CACHE_HOME/spacy_elmo``, else ``~/.cache/spacy_elmo``.

    RETURNS (Path): the directory (not created here).
    """
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base).expanduser() / "spacy_elmo"
