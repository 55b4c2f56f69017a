"""The ``usage`` extra (scipy and scikit-learn): the one message the word-usage statistics give
where it is missing."""
INSTALL = "pip install 'spacy-elmo[usage]'"


def missing_statistics(err: ImportError) -> str:
    """The one-line message for a missing scipy or scikit-learn: what is missing and how to get it."""
    return f"the word-usage statistics need scipy and scikit-learn ({err}): {INSTALL}"
