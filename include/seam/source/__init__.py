"""Source: what Seam reads from MySQL or MariaDB, and publishes.

- ``schema``: a table's columns and key, checked before anything is read.
- ``snapshot``: consistent chunk snapshots at an exact binlog position (MariaDB's method and the portable
  one that works on any MySQL-protocol server), and the reconciliation of chunks read at different positions.
- ``binlog``: the one binlog reader: events into transactions (BEGIN, COMMIT, XA, SAVEPOINT, DDL apart).
  ``rows`` decodes its row events with readers chosen once per table map.
- ``gtid``: positions that survive a failover; ``cascades``: foreign-key rules the binlog does not show.
- ``full_load`` and ``incremental``: the Spark jobs' publishing of a snapshot or a window, between BEGIN and END.
- ``streaming``: the change reader, which publishes each table's changes from the target's applied position.

Delivery guarantee: each module states its own; together, every row change of a followed table is published
at least once, in source order per table, with the position that lets the sink apply it exactly once.
"""
