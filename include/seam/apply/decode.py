"""Decoding what the sink reads: records into msgspec structs built per table schema, a BEGIN's columns
into a schema, Spark's rows into messages, and the soft-delete flag.

Delivery guarantee: none of its own; a record that does not decode as its table's columns fails loudly.
"""

from __future__ import annotations

import json
from typing import Any, NamedTuple

import msgspec

from seam.apply.target import qi
from seam.source.schema import Column, TableSchema
from seam.wire.boundary import Begin


def record_decoder(schema: TableSchema, batch_rows: bool = False) -> msgspec.json.Decoder | _NamesByDict:
    """A decoder for one table's records whose row images decode straight into tuples' worth of fields
    (several times faster than dicts); a record missing a column fails to decode instead of loading NULL.
    ``batch_rows``: only what staging a batch needs (op, images, batch, part, attempt), the hot path."""
    # gc=False: these never form reference cycles, and untracked objects cost the cyclic GC nothing
    plain = not any(c in n for n in schema.names for c in _UNNAMEABLE)
    row = msgspec.defstruct(
        "Row",
        [(f"f{i}", Any, msgspec.field(name=n) if plain else msgspec.NODEFAULT) for i, n in enumerate(schema.names)],
        forbid_unknown_fields=True,
        gc=False,
    )  # a column the target does not know is an error
    fields: list[tuple[Any, ...]] = [("batch", str | None), ("part", int | None, None), ("attempt", int | None, None)]
    if not batch_rows:
        fields += [
            ("txn", dict | None, None),
            ("last", bool, False),
            ("file", str | None, None),
            ("pos", int | None, None),
            ("row", int, 0),
            ("prev", dict | None, None),
            ("seq", int | None, None),
            ("gtids", str | None, None),
            ("server", str | None, None),
        ]
    source = msgspec.defstruct("Source", fields, gc=False)  # other fields are skipped
    wire: list[tuple[Any, ...]] = [("op", str), ("before", row | None), ("after", row | None), ("source", source)]
    if not batch_rows:
        wire += [("ts_ms", int, 0), ("cascade", dict | None, None)]
    if plain:
        return msgspec.json.Decoder(msgspec.defstruct("Wire", wire, gc=False))
    return _NamesByDict(wire, row, schema.names)


# msgspec cannot name a struct field with these: images of a table whose column names hold one are read as
# dicts (slower) and turned into the same structs
_UNNAMEABLE = frozenset('"\\') | frozenset(map(chr, range(32)))


class _NamesByDict:
    def __init__(self, wire: list, row: type, names: tuple[str, ...]):
        image = dict[str, Any] | None
        fields = [(f[0], image, *f[2:]) if f[0] in ("before", "after") else f for f in wire]
        self._decoder = msgspec.json.Decoder(msgspec.defstruct("Wire", fields, gc=False))
        self._row, self._names, self._expected = row, names, set(names)

    def decode(self, value: bytes):
        doc = self._decoder.decode(value)
        for side in ("before", "after"):
            image = getattr(doc, side)
            if image is not None:
                if image.keys() != self._expected:
                    raise msgspec.ValidationError(f"the image's columns are not the table's: {sorted(image)}")
                setattr(doc, side, self._row(*(image[n] for n in self._names)))
        return doc


SOURCE_ONLY: msgspec.json.Decoder[Any] = msgspec.json.Decoder(
    msgspec.defstruct(
        "Wire", [("source", msgspec.defstruct("S", [("batch", str | None, None), ("txn", dict | None, None)]))]
    )
)


def schema_from_begin(begin: Begin) -> TableSchema:
    return TableSchema(
        db=begin.db, table=begin.table, columns=tuple(Column(**c) for c in begin.columns), primary_key=tuple(begin.key)
    )


class SparkRow(NamedTuple):
    """A message of a Spark micro-batch (``seam.wire.kafka_source``'s columns)."""

    topic: str
    topic_id: str | None
    offset: int
    key: bytes | None
    value: bytes
    headers: str  # JSON


def arrow_rows(table) -> list[SparkRow]:
    """A micro-batch fetched as Arrow (``DataFrame.toArrow``: columns, not a Row object per message)."""
    columns = [table.column(name).to_pylist() for name in SparkRow._fields]
    return [SparkRow._make(values) for values in zip(*columns)]


class SparkRowMessage:
    """A ``SparkRow`` with the confluent-kafka Message methods the sink uses."""

    __slots__ = ("_row", "_headers")

    def __init__(self, row: SparkRow):
        self._row = row
        headers = row.headers
        self._headers = [(k, v.encode()) for k, v in json.loads(headers).items()] if headers != "{}" else None

    def topic(self):
        return self._row.topic

    def offset(self):
        return self._row.offset

    def value(self):
        return self._row.value

    def key(self):
        return self._row.key

    def headers(self):
        return self._headers


def flagged_sql(column: str) -> str:
    """A row's soft-delete flag is set: anything but NULL, 0 and false."""
    return f"coalesce({qi(column)}::text, '0') NOT IN ('0', 'false')"


def flagged(value) -> bool:
    return value is not None and str(value).lower() not in ("0", "false")
