"""The run record: what made a command's output (``provenance.py``), the machine it ran on
(``machine.py``) and the plots of its numbers (``plots.py``)."""
from .provenance import data_record, mark_start, model_record, provenance

__all__ = ["data_record", "mark_start", "model_record", "provenance"]
