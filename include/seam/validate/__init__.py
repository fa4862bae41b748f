"""Validate: source against target at one consistent point: counts, checksums, column checks and the
differing rows, with an HTML report and a verdict in the ledger.

- ``validation``: the comparison (both snapshots, the changes between them, buckets, the rows that differ).
- ``canonical``: the record shape's normalisation written as SQL on both sides, so checksums agree.

Delivery guarantee: none (read-only on the source; on the target it writes only its helper functions and
the verdict).
"""
