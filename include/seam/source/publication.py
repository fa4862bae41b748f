"""One batch on its table topic, whoever publishes it (a full load, an incremental window, a repair): BEGIN
with the table's columns and key, then the rows (by the Spark job's tasks, or by the caller), then END with
the tally of every part. Each control message is flushed before the next step, so that on the topic's one
partition the sink sees BEGIN before any row of the batch and END after all of them.

Delivery guarantee: at-least-once into Kafka; the sink applies a batch once and whole, or not at all
(``seam.apply.lifecycle``), so a publication that dies half-way is never visible.
"""

from __future__ import annotations

import functools
from dataclasses import asdict

from seam.core.pipeline import Pipeline, TableConfig
from seam.core.position import Position
from seam.core.schema import TableSchema
from seam.wire.boundary import CONTROL_HEADER, Begin, End, Part, Tally
from seam.wire.topics import Publisher, ensure_topics, table_topic

CONTROL_KEY = b"__seam_control__"
CONTROL = [(CONTROL_HEADER, b"1")]


class Publication:
    """``batch`` of ``table`` on the table's topic (created if missing)."""

    def __init__(self, pipeline: Pipeline, table: TableConfig, batch: str):
        self.pipeline, self.table, self.batch = pipeline, table, batch
        self.topic = table_topic(pipeline, table)
        ensure_topics(pipeline, [self.topic])
        # leased now: its producer id is on its way while the caller prepares
        self._publisher: Publisher | None = Publisher.lease(pipeline, self.topic)

    @property
    def publisher(self) -> Publisher:
        """This batch's own publisher until END; a batch ended and then sent to again leases another."""
        if self._publisher is None:
            self._publisher = Publisher.lease(self.pipeline, self.topic)
        return self._publisher

    def begin(self, mode: str, schema: TableSchema, **extra) -> Begin:
        """BEGIN: the sink opens the batch with these columns and the table's key."""
        begin = Begin(
            batch=self.batch,
            db=self.table.db,
            table=self.table.table,
            mode=mode,
            columns=[asdict(c) for c in schema.columns],
            key=list(self.table.key),
            soft_delete=self.table.soft_delete,
            **extra,
        )
        self._control(begin.to_json())
        return begin

    def send(self, value: bytes, key: bytes | None) -> None:
        """One record of the batch (a row, a reconciliation change), published by the caller."""
        self.publisher.send(self.topic, value, key)

    def end(self, mode: str, position: Position | None, parts: list[Part], **extra) -> End:
        """END: every part's tally and their total, which the sink checks before the batch becomes visible."""
        total = functools.reduce(Tally.merge, (Tally(p.rows, p.checksum) for p in parts), Tally())
        end = End(
            batch=self.batch,
            db=self.table.db,
            table=self.table.table,
            mode=mode,
            position=position,
            parts=parts,
            rows=total.rows,
            checksum=total.checksum,
            **extra,
        )
        self._control(end.to_json())
        done, self._publisher = self.publisher, None
        done.release()  # every message of the batch acknowledged: the next batch of this process may use it
        return end

    def cancel(self, mode: str, why: str) -> End:
        """END without a position: the sink drops the batch, the table stays as it was."""
        return self.end(mode, None, [], stats={"cancelled": why})

    def _control(self, value: bytes) -> None:
        self.publisher.send(self.topic, value, CONTROL_KEY, headers=CONTROL)
        self.publisher.flush()
