"""Corpus embedding: the `elmo` pipeline over a corpus into resumable Parquet shards, on Ray
(``corpus.py``) or Spark (``spark.py``), from inputs where they lie (``inputs.py``), with the run's
settings and report (``runs.py``) and the shards' layout (``shards.py``)."""
from .corpus import embed_corpus
from .runs import EmbedReport
from .shards import read_shards
from .spark import embed_corpus_spark

__all__ = ["EmbedReport", "embed_corpus", "embed_corpus_spark", "read_shards"]
