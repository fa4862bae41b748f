"""Apply: the sink by role. What reaches the target, and when it becomes visible.

- ``sink``: the ``Sink`` (routes each message of a table topic to its role, and runs in the Kafka loop or
  in Spark's ``foreachBatch``); every message group it applies commits with the Kafka offsets and source
  positions it moves.
- ``lifecycle``: each topic's open batch from BEGIN to END; ``batch``: its staging (records into COPY text
  on every core); ``swap``: END's check and the atomic replace of a full
  load; ``merge``: an incremental window merged by key, and its watermark.
- ``changes``: a streamed table's change events (the ``prev`` chain, held transactions, schema changes);
  ``follow_ddl``: the DDL it follows made on the target; ``cascades``: foreign-key cascades applied level by
  level.
- ``decode``: records into per-schema structs.
- ``transaction``: the unit of commit: data, offsets and positions in one transaction; what the sink holds in
  memory is trusted only while its transactions commit.

The ledger, positions and offsets themselves are written by ``seam.state``.

Delivery guarantee: exactly once into the target; see ``seam.apply.sink``.
"""

from seam.core.errors import TargetError


class SinkError(TargetError):
    """The sink cannot go on; the message says why and what to do."""


class TopicTaken(SinkError):
    """Another Seam sink holds one of the topics (a session lock): two would apply it twice. A sink started
    only to see batches through (``--until-batch``) leaves them to that one."""

    def __init__(self, topic: str, holder: str):
        self.topic, self.holder = topic, holder
        super().__init__(
            f"another Seam sink is already applying topic {topic}: {holder}; stop it first (or let it apply this batch)"
        )


class PositionMoved(SinkError):
    """Another process moved a table's applied position since this sink read it (another pipeline's sink
    that applies the same table from topics of its own): what this sink holds of the table is stale, so its
    transaction is rolled back and it reads again from the target."""
