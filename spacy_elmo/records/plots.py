"""matplotlib, when it is installed: plots are an optional extra (``pip install spacy-elmo[plot]``).

Every plot the package and its scripts make goes through ``pyplot()``: without matplotlib the
plot is skipped with one line on stderr, and whatever the run wrote besides (metrics, tables,
models) is written as usual.
"""
import sys
from typing import Any, Optional

PLOT_EXTRA = "plot"


def skipped_message(what: str) -> str:
    return (
        f"{what}: not plotted, matplotlib is not installed "
        f"(pip install 'spacy-elmo[{PLOT_EXTRA}]' adds it); the results are written without it"
    )


def pyplot(what: str) -> Optional[Any]:
    """``matplotlib.pyplot`` on the file-only Agg backend, or None (after one line on stderr)
    when matplotlib cannot be imported. what (str): the plot, for the message (e.g. its path)."""
    try:
        import matplotlib
    except ImportError:
        print(skipped_message(what), file=sys.stderr, flush=True)
        return None
    matplotlib.use("Agg")  # files only: no display on servers and CI
    import matplotlib.pyplot as plt

    return plt
