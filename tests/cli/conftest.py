"""An environment without the usage extra: scipy and scikit-learn cannot be imported."""
import sys

import pytest

STATISTICS = ("scipy", "sklearn")
NEEDING_THEM = ("clustering", "ranking", "change", "senses")


@pytest.fixture()
def without_statistics(monkeypatch):
    """Block every scipy and scikit-learn import, and forget the modules that made them."""
    for name in list(sys.modules):
        if name.split(".")[0] in STATISTICS:
            monkeypatch.setitem(sys.modules, name, None)
    for name in STATISTICS:
        monkeypatch.setitem(sys.modules, name, None)
    for module in NEEDING_THEM:
        monkeypatch.delitem(sys.modules, f"spacy_elmo.usage.{module}", raising=False)
