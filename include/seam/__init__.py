"""Seam: keep MySQL tables in sync with a downstream store, in batch and in stream, with proof.

One room per role, top-down as a row travels:

- ``seam.source``: what is read from MySQL/MariaDB (schema, consistent snapshots, the binlog) and published.
- ``seam.wire``: what travels through Kafka (records, codecs, batch boundaries, topics).
- ``seam.apply``: the sink, which makes batches and change events visible in the target exactly once.
- ``seam.state``: the one owner of the ``seam`` schema (ledger, positions, offsets, heartbeats).
- ``seam.validate``: source against target at one consistent point.
- On top: ``seam.loads`` (the load runner), ``seam.supervise`` and ``seam.settlement`` (what Airflow runs),
  ``seam.config`` (pipelines), ``seam.cli``.
"""

__version__ = "0.1.0"
