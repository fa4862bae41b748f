"""Validate: source against target at one consistent point: counts, checksums, column checks and the
differing rows, with an HTML report and a verdict in the ledger.

- ``validation``: a table's validation planned, both snapshots taken, the verdict recorded.
- ``compare``: buckets, bisection and the rows that differ; ``at_position``: the rows as they were at the
  target's position (the binlog's changes between the two snapshots).
- ``side``: the scope and each side's SQL; ``report``: the report and its HTML.
- ``canonical``: the record shape's normalisation written as SQL on both sides, so checksums agree.

Delivery guarantee: none (read-only on the source; on the target it writes only its helper functions and
the verdict).
"""
