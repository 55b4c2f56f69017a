"""Inference specializations of the biLM: what ``optimize_for_inference`` (``fast``) switches on.

``bidirectional`` (both directions in lockstep on paired weights), ``char_cache`` (token
encodings kept across calls), ``quantize`` (reduced-precision linear layers) and ``fast`` (the
one function that applies them). The plain computation (``bilm/model.py``, ``bilm/lstm.py``)
needs none of them to be correct; each is measured against it in the tests and in ``bench/``.
Nothing is imported here, so that ``bilm.model`` can import ``bidirectional`` without a cycle.
"""
