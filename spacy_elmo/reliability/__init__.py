"""Reliability checks of the `elmo` component that both the test suite and the long-running
scripts run: generated messy Docs (``fuzz``) and memory under a stream of Docs (``soak``).

Not imported by the rest of the package; they need the ``test`` extra (hypothesis, psutil).
"""
