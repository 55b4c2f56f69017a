"""The biLM for other runtimes: ONNX (ONNX Runtime) and TorchScript files of the reference computation.

``graph.py`` (``ExportGraph``: ``BiLM.forward``'s layers as one graph whose shapes follow the
input's, dynamic batch and length), ``exporter.py`` (``export_model``/``export_bilm``: the file,
the record beside it, the int8 check) and ``runtime.py`` (``ExportedBiLM``: run a file as
``BiLM.embed`` runs). ``serve.py`` serves a pipeline's ``doc._.elmo`` over HTTP (its queue in
``serve_queue.py``, its bodies in ``serve_body.py``, its counters in ``serve_metrics.py``, the pipeline
``serve`` builds in ``serve_pipeline.py``). docs/export.md.
"""
from .exporter import FORMATS, OPSET, PRECISIONS, ExportError, export_bilm, export_model, record_path
from .graph import ExportGraph
from .runtime import ExportedBiLM

__all__ = [
    "FORMATS",
    "OPSET",
    "PRECISIONS",
    "ExportError",
    "ExportGraph",
    "ExportedBiLM",
    "export_bilm",
    "export_model",
    "record_path",
]
