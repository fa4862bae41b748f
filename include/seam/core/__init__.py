"""Seam's ground floor: what every room (source, wire, apply, state, validate, the CLI) builds on and which
imports nothing else of Seam. Delivery guarantee: none (definitions only)."""
