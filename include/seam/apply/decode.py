"""Decoding what the sink reads: records into msgspec structs built per table schema, a BEGIN's columns
into a schema, Spark's rows into messages, and the soft-delete flag.

NUL characters. MySQL text and JSON may hold U+0000; PostgreSQL text and jsonb cannot. In a record whose
bytes hold the escape that JSON writes a NUL as, the text and JSON columns of every image have it mapped to
``target.text_nul``'s replacement (U+FFFD, or nothing), so keys and rows stay consistent across the load and
the stream; validation maps the source's text the same way (``seam.validate.canonical``). Records are kept as
the source sent them: only what reaches the target is mapped.

Delivery guarantee: none of its own; a record that does not decode as its table's columns fails loudly.
"""

from __future__ import annotations

import json
import re
from typing import Any, NamedTuple

import msgspec

from seam.core.identifiers import qi
from seam.core.schema import Column, TableSchema
from seam.wire.boundary import Begin
from seam.wire.codecs import Enum, Json, Set, Text, codec


def record_decoder(schema: TableSchema, nul: str, batch_rows: bool = False):
    """A decoder for one table's records whose row images decode straight into tuples' worth of fields
    (several times faster than dicts); a record missing a column fails to decode instead of loading NULL.
    ``nul``: what a NUL in a text or JSON value becomes (module docstring). ``batch_rows``: only what staging
    a batch needs (op, images, batch, part, attempt), the hot path."""
    decoder = _record_decoder(schema, batch_rows)
    texts = [f"f{i}" for i, c in enumerate(schema.columns) if isinstance(codec(c), (Text, Enum, Set))]
    jsons = [f"f{i}" for i, c in enumerate(schema.columns) if isinstance(codec(c), Json)]
    return _NulMapped(decoder, texts, jsons, nul) if texts or jsons else decoder


class _NulMapped:
    """A record decoder that maps NUL characters; a record without any costs one search of its bytes."""

    def __init__(self, decoder, texts: list[str], jsons: list[str], nul: str):
        self._decoder, self._texts, self._jsons, self._nul = decoder, texts, jsons, nul

    def decode(self, value: bytes):
        doc = self._decoder.decode(value)
        if b"\\u0000" in value:  # how JSON writes a NUL (inside a JSON column's text: \\u0000, found too)
            for side in ("before", "after"):
                image = getattr(doc, side)
                if image is not None:
                    self._map(image)
        return doc

    def _map(self, image) -> None:
        for name in self._texts:
            text = getattr(image, name)
            if isinstance(text, str) and "\x00" in text:
                setattr(image, name, text.replace("\x00", self._nul))
        for name in self._jsons:  # the column's JSON text, where a NUL is the escape \u0000
            text = getattr(image, name)
            if isinstance(text, str) and "\\u0000" in text:
                setattr(image, name, _JSON_NUL.sub(lambda m: m.group(1) + self._nul, text))


# the escape \u0000 in JSON text, unless its backslash is itself escaped (\\u0000 is a backslash and "u0000")
_JSON_NUL = re.compile(r"(?<!\\)((?:\\\\)*)\\u0000")


def _record_decoder(schema: TableSchema, batch_rows: bool) -> msgspec.json.Decoder | _NamesByDict:
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
