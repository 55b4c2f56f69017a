"""Deprecated: the callback lives in ``spacy_elmo.threads``; this name stays for configs and entry points
written against it (the registered name ``spacy-elmo.set_torch_threads.v1`` is unchanged)."""
from .threads import set_torch_threads_v1  # noqa: F401
