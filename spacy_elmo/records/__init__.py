"""The run record: what made a command's output (``provenance.py``), the machine it ran on
(``machine.py``) and the plots of its numbers (``plots.py``)."""
