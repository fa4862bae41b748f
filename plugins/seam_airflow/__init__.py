"""Airflow-facing code for Seam: the hook that owns Seam's connections, and thin operators."""
