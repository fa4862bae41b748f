"""The compiled snapshot stager (``seam.apply._snapshotrows``) against the Python way it stands in for.

Seeded random snapshot records of random tables are staged by ``stage_rows`` twice, with the compiled stager
and without it. Both must give the same COPY lines (as a multiset: the compiled one writes the rows it takes
first), the same change lines, the same held messages and the same (rows, CRC sum) per (part, attempt). The
records are written by an encoder of the test's own that escapes at random (``\\u`` escapes, surrogate pairs,
``\\/``, spaces between tokens) over values with COPY's special characters, quotes, NULs and text outside the
BMP; a share of them is damaged (bytes flipped or cut, keys reordered, repeated or renamed, another op or batch,
floats, booleans, ``-0``, leading zeros, lone surrogates, bytes that are not UTF-8), and some are not records.
Where the Python way holds a message or fails, the compiled one must not have staged it.
"""

from __future__ import annotations

import random
import zlib

import pytest

import seam.apply.batch as batch_module
from seam.apply.batch import Staging, stage_rows
from seam.apply.target import Landing
from seam.core.schema import Column, TableSchema
from seam.wire.boundary import FRAME_KEY, block_records, frame, frame_blocks

BATCH = "20261127T000000-0badf00d"
SEEDS = range(40)

TEXT = ["", "a", "row 1", "tab\there", "new\nline", "back\\slash", 'quo"te', "\r\b\f\v", "é", "日本", "😀", "\x7f",
        "\x00", "x\x00y", "/", "\u2028", "\ud7ff", "\ue000", "\U0010ffff"]  # fmt: skip


def _column(r: random.Random, i: int) -> Column:
    kind = r.choice(["bigint", "int", "varchar", "text", "decimal", "date", "datetime", "char", "json"])
    nullable = r.random() < 0.5
    names = [f"c{i}", f"col_{i}", f"é{i}", f"日{i}", f"a b{i}"]
    type_ = {"decimal": "decimal(18,2)", "varchar": "varchar(64)", "char": "char(8)"}.get(kind, kind)
    return Column(r.choice(names), kind, type_, nullable, 2 if kind == "decimal" else None)


def _value(r: random.Random, column: Column):
    if column.nullable and r.random() < 0.2:
        return None
    if column.data_type in ("date", "datetime") and r.random() < 0.15:
        return None  # a zero date: null in the record even where the column is NOT NULL
    if column.data_type in ("bigint", "int"):
        return r.choice([0, 1, -1, 42, 2**63 - 1, -(2**63), r.randrange(-(10**12), 10**12)])
    if column.data_type == "decimal":
        return f"{r.randrange(-(10**6), 10**6)}.{r.randrange(100):02d}"
    if column.data_type == "date":
        return f"20{r.randrange(10, 30)}-0{r.randrange(1, 10)}-1{r.randrange(10)}"
    if column.data_type == "datetime":
        return f"2026-01-02 03:04:05.{r.randrange(10**6):06d}"
    if column.data_type == "json":
        return r.choice(['{"a": 1}', '["x", "\\u0000"]', "null", '"s"'])
    return "".join(r.choice(TEXT) for _ in range(r.randrange(4)))


def _string(r: random.Random, text: str, rate: float) -> str:
    """JSON text of a string, each character written plainly or escaped (``rate``) at random."""
    out = ['"']
    for ch in text:
        code = ord(ch)
        plain = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
        if ch in plain:
            out.append(plain[ch] if r.random() < 0.7 else f"\\u{code:04x}")
        elif code < 0x20:
            out.append(f"\\u{code:04X}")
        elif ch == "/" and r.random() < 0.5:
            out.append("\\/")
        elif r.random() < rate:
            if code > 0xFFFF:
                high, low = 0xD800 + ((code - 0x10000) >> 10), 0xDC00 + ((code - 0x10000) & 0x3FF)
                out.append(f"\\u{high:04x}\\u{low:04X}")
            else:
                out.append(f"\\u{code:04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _json(r: random.Random, value, rate: float = 0.2, keys: float = 0.0) -> str:
    """JSON text of a value; strings escaped at ``rate``, the keys of objects at ``keys``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return _string(r, value, rate)
    if isinstance(value, dict):
        pairs = [f"{_string(r, k, keys)}{_ws(r)}:{_ws(r)}{_json(r, v, rate, keys)}" for k, v in value.items()]
        return "{" + _ws(r) + ("," + _ws(r)).join(pairs) + _ws(r) + "}"
    return "[" + ",".join(_json(r, v, rate, keys) for v in value) + "]"


def _ws(r: random.Random) -> str:
    return r.choice(["", "", "", " ", "\n\t "])


def _record(r: random.Random, columns: list[Column], part: int, attempt: int) -> dict:
    after = {c.name: _value(r, c) for c in columns}
    source = {"db": "d", "table": "t", "snapshot": True, "batch": BATCH, "file": "mysql-bin.000001", "pos": 4,
              "row": 0, "gtid": None, "part": part, "attempt": attempt}  # fmt: skip
    key = {columns[0].name: after[columns[0].name]}
    return {"v": 1, "op": "r", "ts_ms": 1, "key": key, "before": None, "after": after, "source": source}


def _damaged(r: random.Random, record: dict, columns: list[Column]) -> str | bytes:
    """The record made unusual in one of the ways the compiled stager must leave to Python."""
    how = r.randrange(16)
    after, source = record["after"], record["source"]
    name = columns[r.randrange(len(columns))].name
    if how == 0:
        record["after"] = dict(reversed(list(after.items())))
    elif how == 1:
        after[name] = r.choice([1.5, 1e20, True, False, [1], {"x": 1}])
    elif how == 2:
        record["op"] = r.choice(["c", "u", "d", "R", ""])
    elif how == 3:
        source["batch"] = r.choice(["other", None, BATCH + "x", BATCH[:-1]])
    elif how == 4:
        source["part"] = r.choice([None, "1", 1.0])
    elif how == 5:
        del record[r.choice(["op", "before", "after", "source"])]
    elif how == 6:
        after[name + "x"] = 1
    elif how == 7:
        record["before"] = dict(after)
    elif how == 8:
        del source["attempt"]
    text = _json(r, record, keys=r.choice([0.0, 0.0, 0.1]))
    if how == 9:
        text = text.replace(f'"{name}":', f'"{name}":-0,"{name}":', 1)
    elif how == 10:
        text = text[: r.randrange(len(text))]
    elif how == 11:
        text = text + r.choice([" ", "x", "{}", "\n"])
    elif how == 12:
        text = text.replace('"part"', '"part": 7, "part"', 1)
    elif how == 13:
        text = text.replace('"after"', '"after": null, "after"', 1)
    data = text.encode("utf-8", "surrogatepass")
    if how == 14:
        data = bytearray(data)
        for _ in range(r.randrange(1, 4)):
            data[r.randrange(len(data))] = r.randrange(256)
        data = bytes(data)
    elif how == 15:
        data = data.replace(b'"', b'"\\ud800', 1) if r.random() < 0.5 else data.replace(b"a", b"\xed\xa0\x80", 1)
    return data


def _messages(seed: int) -> tuple[Staging, list[bytes]]:
    r = random.Random(seed)
    columns = []
    for i in range(r.randrange(1, 7)):
        column = _column(r, i)
        if column.name not in {c.name for c in columns}:
            columns.append(column)
    schema = TableSchema("d", "t", tuple(columns), (columns[0].name,))
    landing = Landing(zero_dates=r.choice(["-infinity", "null"]))
    staging = Staging(BATCH, schema, (columns[0].name,), landing)
    messages = []
    for _ in range(300):
        part, attempt = r.randrange(3), r.choice([0, 1, 2**40])
        record = _record(r, columns, part, attempt)
        roll = r.random()
        if roll < 0.6:  # keys escaped in a few: the compiled stager leaves those to Python
            messages.append(_json(r, record, r.choice([0.0, 0.05, 0.2]), 0.1 if roll < 0.05 else 0.0).encode())
        elif roll < 0.95:
            messages.append(_damaged(r, record, columns))
        else:
            messages.append(r.choice([b"", b"{}", b"null", b"[]", r.randbytes(40)]))
    return staging, messages


def _staged(staging: Staging, messages: list[bytes], compiled, blocks: bytes | None = None) -> tuple:
    batch_module.native = compiled
    batch_module._native_plan.cache_clear()
    try:
        got = stage_rows(staging, messages, list(range(len(messages))), blocks)
    except Exception as exc:  # noqa: BLE001 - compared, not hidden
        return ("raised", type(exc).__name__)
    finally:
        batch_module.native = COMPILED
        batch_module._native_plan.cache_clear()
    return sorted(got.stage.splitlines()), got.changes, got.held, got.sums


COMPILED = batch_module.native


def _compiled():
    """The compiled stager; `make setup` builds it (gcc, Python's and zlib's headers), so its absence fails."""
    assert COMPILED is not None, "seam.apply._snapshotrows is not built: run `make setup` and read its warning"
    return COMPILED


@pytest.mark.parametrize("seed", SEEDS)
def test_the_compiled_stager_stages_what_python_stages(seed):
    staging, messages = _messages(seed)
    assert _staged(staging, messages, _compiled()) == _staged(staging, messages, None)


def test_it_takes_the_rows_it_is_sure_of_and_leaves_the_rest():
    """Not a vacuous comparison: over the seeds, many rows are staged by compiled code, and many left."""
    taken = given_back = 0
    for seed in SEEDS:
        staging, messages = _messages(seed)
        plan = batch_module._native_plan(staging)
        if plan is None:
            continue
        _, rest, _, _ = _compiled().stage(messages, bytes(len(messages)), BATCH.encode(), *plan)
        taken += len(messages) - len(rest)
        given_back += len(rest)
    assert taken > 1500  # of 12,000: a NUL in a text value, or an escaped key, leaves a record to Python
    assert given_back > 3000


def test_copy_text_of_awkward_values():
    columns = (Column("id", "bigint", "bigint", False), Column("t", "text", "text", True),
               Column("d", "date", "date", False))  # fmt: skip
    staging = Staging(BATCH, TableSchema("d", "t", columns, ("id",)), ("id",), Landing())
    value = (
        '{"op":"r","before":null,"after":{"id":-7,"t":"a\\tb\\\\c\\n\\u00e9\\ud83d\\ude00\\/","d":null},'
        f'"source":{{"batch":"{BATCH}","part":3,"attempt":9}}}}'
    ).encode()
    names, infinite, _ = batch_module._native_plan(staging)  # COPY text: no binary kinds
    text, rest, sums, binary = _compiled().stage([value], b"\0", BATCH.encode(), names, infinite)
    assert rest == [] and not binary
    assert text == "-7\ta\\tb\\\\c\\né😀/\t-infinity\t3\t9\n".encode()
    assert list(sums) == [(3, 9)] and sums[(3, 9)][0] == 1


def _in_blocks(r: random.Random, records: list[bytes]) -> tuple[list[bytes], bytes]:
    """The records as messages of 1 to 40 records each (``boundary.blocks``' form), some of one record sent
    alone, with their block flags."""
    values, flags = [], bytearray()
    i = 0
    while i < len(records):
        n = r.randrange(1, 41)
        group = records[i : i + n]
        alone = len(group) == 1 and r.random() < 0.5
        values.append(group[0] if alone else b"\n".join(group))
        flags.append(0 if alone else 1)
        i += n
    return values, bytes(flags)


@pytest.mark.parametrize("seed", SEEDS)
def test_blocks_stage_the_same_compiled_or_not(seed):
    """Blocks holding the seeded records, damaged ones and ones that are not records among them."""
    staging, messages = _messages(seed)
    values, flags = _in_blocks(random.Random(seed), messages)
    assert _staged(staging, values, _compiled(), flags) == _staged(staging, values, None, flags)


@pytest.mark.parametrize("seed", range(10))
def test_a_block_stages_as_its_records_alone(seed):
    """Well-formed rows: the same COPY lines and tallies in blocks as one per message, and no block held."""
    staging, messages = _messages(seed)
    # the test's encoder puts newlines between tokens at times; Seam's records never hold one (JSON escapes it
    # in a string), which is what lets a block's lines be its records
    rows = [m.replace(b"\n", b" ") for m in messages]
    rows = [m for m in rows if _a_row(staging, m)]
    values, flags = _in_blocks(random.Random(seed), rows)
    blocked = _staged(staging, values, _compiled(), flags)
    by_one = _staged(staging, rows, _compiled())
    assert blocked[0] == by_one[0] and blocked[1] == by_one[1] and blocked[3] == by_one[3]
    assert blocked[2] == [] and by_one[2] == []
    assert sum(v[0] for v in blocked[3].values()) > 50


def _a_row(staging: Staging, message: bytes) -> bool:
    """Whether the message alone is staged as a snapshot row of the batch."""
    got = _staged(staging, [message], None)
    return len(got) == 4 and len(got[0]) == 1 and got[1] == b"" and got[2] == []


def test_a_block_holding_a_change_is_held_whole():
    columns = (Column("id", "bigint", "bigint", False),)
    staging = Staging(BATCH, TableSchema("d", "t", columns, ("id",)), ("id",), Landing())
    row = f'{{"op":"r","before":null,"after":{{"id":1}},"source":{{"batch":"{BATCH}","part":0,"attempt":1}}}}'
    change = f'{{"op":"c","before":null,"after":{{"id":2}},"source":{{"batch":"{BATCH}","part":-1,"attempt":0}}}}'
    for compiled in (_compiled(), None):
        got = _staged(staging, [row.encode(), f"{row}\n{change}".encode()], compiled, b"\0\1")
        assert got[2] == [1]  # the block: the sink quarantines it (a block holds rows only)
        assert got[0] == [b"1\t0\t1", b"1\t0\t1"] and got[1] == b""


def _framed(seed: int) -> tuple[Staging, list[bytes], bytes, list[bytes]]:
    """Frame blocks (``boundary.frame``) of seeded rows, some damaged, with their kinds, and every row's record."""
    staging, _ = _messages(seed)
    r = random.Random(seed + 1000)
    columns = list(staging.schema.columns)
    values, kinds, records = [], bytearray(), []
    for _ in range(r.randrange(1, 8)):
        part, attempt = r.randrange(3), r.choice([0, 1, 2**40])
        template = _record(r, columns, part, attempt)
        text = _json(r, template, 0.0).replace("\n\t ", " ")
        head = text[: text.index('"key"') + 6].encode()
        middle = b',"before":null,"after":'
        source = _json(r, template["source"], r.choice([0.0, 0.2])).replace("\n\t ", " ").encode()
        tail = b',"source":' + source + b"}"
        if r.random() < 0.1:
            tail = tail[:-1]  # a frame whose records are all broken
        lines = []
        for _ in range(r.randrange(1, 60)):
            after = {c.name: _value(r, c) for c in columns}
            key, image = (
                _json(r, v, 0.2).replace("\n\t ", " ").encode()
                for v in ({columns[0].name: after[columns[0].name]}, after)
            )
            if r.random() < 0.1:
                image = bytearray(image)
                image[r.randrange(len(image))] = r.randrange(256)
                image = bytes(image)
            if r.random() < 0.05:  # a key that is not one whole value: read with what follows, or refused
                key = r.choice([key[:-1], key + b',"op":"r"', key + b" 1", b"", b"{"])
            keyless = r.random() < 0.2
            lines.append(image if keyless else key + b"\t" + image)
            records += [head + (image if keyless else key) + middle + image + tail] if b"\n" not in image else []
        first = frame(head, middle, tail)
        if r.random() < 0.05:
            first = b"12 x " + first  # a frame that does not parse
        values.append(first + b"\n" + b"\n".join(lines))
        kinds.append(2)
    return staging, values, bytes(kinds), records


@pytest.mark.parametrize("seed", SEEDS)
def test_frame_blocks_stage_the_same_compiled_or_not(seed):
    staging, values, kinds, _ = _framed(seed)
    assert _staged(staging, values, _compiled(), kinds) == _staged(staging, values, None, kinds)


@pytest.mark.parametrize("seed", SEEDS)
def test_a_frame_block_stages_as_its_records_alone(seed):
    """Where every row of a frame is well formed, the same lines and tallies as its records one per message."""
    staging, values, kinds, records = _framed(seed)
    whole = [(v, k) for v, k in zip(values, kinds) if all(_a_row(staging, rec) for rec in block_records(FRAME_KEY, v))]
    if not whole:
        return
    framed = _staged(staging, [v for v, _ in whole], _compiled(), bytes(k for _, k in whole))
    alone = _staged(staging, [rec for v, _ in whole for rec in block_records(FRAME_KEY, v)], _compiled())
    assert framed[0] == alone[0] and framed[3] == alone[3] and framed[2] == []


def test_frame_rows_are_their_records():
    head, middle, tail = b'{"op":"r","key":', b',"before":null,"after":', b',"source":{"part":1}}'
    rows = [(b'{"id":1}', b'{"id":1,"t":"a\\tb"}'), (b'{"id":2}', b'{"id":2,"t":null}')]
    value = frame(head, middle, tail) + b"\n" + b"\n".join(k + b"\t" + a for k, a in rows)
    records = block_records(FRAME_KEY, value)
    assert records == [head + k + middle + a + tail for k, a in rows]
    assert frame_blocks([(a, k) for k, a in rows], True, head, middle, tail) == ([value], sum(map(zlib.crc32, records)))
    keyless = frame(head, middle, tail) + b"\n" + rows[0][1]
    assert block_records(FRAME_KEY, keyless) == [head + rows[0][1] + middle + rows[0][1] + tail]
    assert block_records(FRAME_KEY, b"1 2 x\n" + rows[0][1]) == [b"1 2 x\n" + rows[0][1]]  # not a frame: none
