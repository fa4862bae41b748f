"""An open batch as the sink holds it between its BEGIN and its END: its schema, staging tables, the
tallies of what was staged per (part, attempt), and the decoder and converter of its rows.

Delivery guarantee: none of its own; the tallies are stored with the staged rows (``state.ledger``), so a
restarted sink resumes a batch exactly.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import msgspec

from seam.source.schema import TableSchema
from seam.wire.boundary import Begin, Tally


@dataclass
class OpenBatch:
    begin: Begin
    schema: TableSchema
    stage: str
    changes: str
    convert: Callable
    decode: Callable
    tallies: dict[tuple[int, int], Tally] = field(default_factory=dict)


def key_of(batch: OpenBatch, image) -> dict:
    values = dict(zip(batch.schema.names, msgspec.structs.astuple(image)))
    return {k: values[k] for k in batch.begin.key} if batch.begin.key else values
