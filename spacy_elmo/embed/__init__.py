"""Corpus embedding: the `elmo` pipeline over a corpus into resumable Parquet shards, on Ray
(``corpus.py``) or Spark (``spark.py``), from inputs where they lie (``inputs.py``), with the run's
settings and report (``runs.py``) and the shards' layout (``shards.py``)."""
