"""Shipping: the packaged biLM and the check of a packaged pipeline."""
