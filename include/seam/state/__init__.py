"""State: the one owner of the ``seam`` schema in the target. Nothing outside this package writes SQL
against its tables.

- ``schema``: the tables, as versioned migrations (an existing target upgrades in place), and the named
  advisory locks every process takes.
- ``ledger``: the load ledger (batches, their parts' tallies), watermarks, validation verdicts.
- ``positions``: each table's applied source position and stream state (stopped, columns, gaps), the Kafka
  offsets stored with the data, changes held during an open batch, rows changed by foreign-key cascades.
- ``parts``: the stream's parts' heartbeats, and what a person reads of a table (``table_summary``).

Two things live in the schema without being state: a batch's staging tables (``ledger.staging_tables``
names them; ``seam.apply`` fills, swaps and drops them with the batch's data) and validation's SQL helper
functions (``seam.validate.canonical``), which the comparison calls.

Delivery guarantee: none of its own; the sink writes positions and offsets in the transaction of the data
they describe (every function here runs in its caller's transaction). Heartbeats are best effort.
"""
