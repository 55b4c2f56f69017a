"""Word usages: every use of target words in a corpus as vectors, the biLM's substitutes, semantic
change between two corpora, and senses induced from substitutes.

``usages`` collects the uses and their vectors, ``substitutes`` reads the head's softmax at each
token, ``change`` scores change (PRT, APD, JSD) and ``ranking`` scores those against a gold
standard, ``senses`` clusters a word's uses into senses, ``clustering`` holds the clustering and the
measures. The statistics are scipy's and scikit-learn's (the ``usage`` extra); collecting uses and
reading substitutes need neither.
"""
INSTALL = "pip install 'spacy-elmo[usage]'"


def missing_statistics(err: ImportError) -> str:
    """The one-line message for a missing scipy or scikit-learn: what is missing and how to get it."""
    return f"the word-usage statistics need scipy and scikit-learn ({err}): {INSTALL}"
