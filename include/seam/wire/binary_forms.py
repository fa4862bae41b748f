"""Binary forms of values that the record, MySQL and PostgreSQL spell differently: an IPv6 address as
inet_ntop prints it, a geometry as MySQL stores it (SRID + WKB) and as PostGIS's extended WKB.

Delivery guarantee: none (pure functions).
"""

from __future__ import annotations

import base64
import ipaddress
import struct
from typing import Literal


def inet6_text(packed: bytes) -> str:
    """An IPv6 address as MariaDB and PostgreSQL print it (inet_ntop): Python prints ::ffff:1.2.3.4 as
    ::ffff:102:304."""
    words = struct.unpack(">8H", packed)
    if words[:5] == (0,) * 5 and words[5] == 0xFFFF:
        return f"::ffff:{ipaddress.IPv4Address(packed[12:])}"
    if words[:6] == (0,) * 6 and words[6] != 0:
        return f"::{ipaddress.IPv4Address(packed[12:])}"
    return ipaddress.IPv6Address(packed).compressed


def stored_bytes(value: dict) -> bytes:
    """The record value as MySQL stores it (the fallback's bytea)."""
    return value["srid"].to_bytes(4, "little") + base64.b64decode(value["wkb"])


def ewkb_hex(value: dict) -> str:
    """The record value as PostGIS's extended WKB in hex, which ``geometry`` input reads with its SRID."""
    wkb = base64.b64decode(value["wkb"])
    order: Literal["little", "big"] = "little" if wkb[0] == 1 else "big"
    kind = int.from_bytes(wkb[1:5], order) | 0x20000000
    return (wkb[:1] + kind.to_bytes(4, order) + value["srid"].to_bytes(4, order) + wkb[5:]).hex()


def ewkb_to_record(ewkb: bytes) -> dict:
    """PostGIS's extended WKB (an SRID flag and the SRID after the top-level type) -> the record value."""
    order: Literal["little", "big"] = "little" if ewkb[0] == 1 else "big"
    kind = int.from_bytes(ewkb[1:5], order)
    srid = 0
    body = ewkb[5:]
    if kind & 0x20000000:
        srid, body = int.from_bytes(ewkb[5:9], order), ewkb[9:]
    if order == "big":
        raise ValueError("a big-endian geometry read back from PostGIS: expected little-endian")
    wkb = ewkb[:1] + (kind & ~0x20000000).to_bytes(4, order) + body
    return {"wkb": base64.b64encode(wkb).decode(), "srid": srid}
