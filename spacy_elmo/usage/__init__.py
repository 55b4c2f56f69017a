"""Word usages: every use of target words in a corpus as vectors, the biLM's substitutes, semantic
change between two corpora, and senses induced from substitutes.

``usages`` collects the uses and their vectors, ``substitutes`` reads the head's softmax at each
token, ``change`` scores change (PRT, APD, JSD) and ``ranking`` scores those against a gold
standard, ``senses`` clusters a word's uses into senses, ``clustering`` holds the clustering and the
measures. The statistics are scipy's and scikit-learn's (the ``usage`` extra); collecting uses and
reading substitutes need neither (``extra.py``: the message where they are missing), so the
names that need them are imported when first asked for.
"""
from .substitutes import Substitute, TokenSubstitutes, doc_substitutes, sentence_substitutes
from .usages import Usage, UsageSet, collect_usages, read_usages, write_usages

# these need the usage extra: imported when asked for, so the rest works without it
_WITH_STATISTICS = {"ChangeSettings": "change", "run_change": "change", "SenseSettings": "senses",
                    "induce_senses": "senses"}

__all__ = [
    "ChangeSettings",
    "SenseSettings",
    "Substitute",
    "TokenSubstitutes",
    "Usage",
    "UsageSet",
    "collect_usages",
    "doc_substitutes",
    "induce_senses",
    "read_usages",
    "run_change",
    "sentence_substitutes",
    "write_usages",
]


def __getattr__(name: str):
    if name in _WITH_STATISTICS:
        from importlib import import_module

        return getattr(import_module(f".{_WITH_STATISTICS[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
