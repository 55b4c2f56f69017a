"""The run record: what made a command's output (``provenance.py``), the machine it ran on
(``machine.py``) and the plots of its numbers (``plots.py``)."""
# the record itself is ``provenance.provenance``: a name of its own here would hide the module
from .provenance import data_record, mark_start, model_record, write_tree_manifest

__all__ = ["data_record", "mark_start", "model_record", "write_tree_manifest"]
