"""A corpus of damaged and hostile model files in every published layout (``layouts``, ``cases``,
``damage``, ``archives``) and the runner that loads each in a child process within a time and memory
budget and judges the outcome (``runner``). The full corpus: ``python -m lab.reliability.hostile_files``;
a subset runs in tests/reliability/test_hostile_files.py."""
