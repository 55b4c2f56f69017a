"""The experiments behind the published numbers: downstream runs, their tables and plots, campaign curves
and accelerator stages."""
