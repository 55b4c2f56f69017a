"""Parity with the reference outputs, and the fuzz and soak drivers of the component."""
