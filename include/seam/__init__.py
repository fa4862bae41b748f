"""Seam: keep MySQL tables in sync with a downstream store, in batch and in stream, with proof."""

__version__ = "0.1.0"
