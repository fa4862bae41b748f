"""GTID sets (seam.source.gtid): MySQL's and MariaDB's forms, as servers print them and as the binlog names
single transactions; and the wire: positions carry their set and server to the sink."""

from __future__ import annotations

import pytest

from seam.core.position import Position
from seam.source.gtid import GtidError, GtidSet
from seam.wire.boundary import End, Heartbeat, Rebase, parse_control
from seam.wire.records import Record

U1 = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
U2 = "4c9e3dfc-9d25-11e9-8d2e-0242ac1cfd7e"


def test_mysql_set_as_the_server_prints_it():
    # gtid_executed wraps lines after commas and may list a uuid in upper case
    s = GtidSet(f"{U2}:1-5:7,\n{U1.upper()}:1-100")
    assert str(s) == f"{U1}:1-100,{U2}:1-5:7"
    assert s.flavour == "mysql"
    assert f"{U2}:4" in s and f"{U2}:6" not in s and f"{U1}:100" in s and f"{U1}:101" not in s


def test_mysql_add_merges_adjacent_intervals():
    s = GtidSet(f"{U1}:1-5:7-9")
    s.add(f"{U1}:6")
    assert str(s) == f"{U1}:1-9"
    s.add(f"{U2}:1")
    s.add(f"{U2}:3")
    assert str(s) == f"{U1}:1-9,{U2}:1:3"


def test_mysql_tagged_gtids():
    s = GtidSet(f"{U1}:1-3:nightly:1-2")
    assert f"{U1}:nightly:2" in s and f"{U1}:nightly:3" not in s and f"{U1}:3" in s
    s.add(f"{U1}:nightly:3")
    assert str(s) == f"{U1}:1-3:nightly:1-3"


def test_mysql_set_before_some_transactions():
    # the set at a position = the set at the binlog's end less what was logged after the position
    head = GtidSet(f"{U1}:1-10,{U2}:1-4")
    assert str(head.without([f"{U1}:10", f"{U2}:4", f"{U2}:3"])) == f"{U1}:1-9,{U2}:1-2"
    assert str(head.without([f"{U1}:5"])) == f"{U1}:1-4:6-10,{U2}:1-4"


def test_subsets_and_what_is_missing():
    applied, server = GtidSet(f"{U1}:1-10,{U2}:1-3"), GtidSet(f"{U1}:1-8,{U2}:1-5")
    assert not applied.issubset(server) and GtidSet(f"{U1}:1-8").issubset(server)
    assert applied.missing_from(server) == f"{U1}:9-10"
    lost, promoted = GtidSet("0-11-460,1-11-7"), GtidSet("0-12-470,1-11-5")
    assert not lost.issubset(promoted) and lost.missing_from(promoted) == "1-11-7"
    assert GtidSet("0-11-460").issubset(promoted)


def test_mariadb_position():
    s = GtidSet("0-1-42,2-5-7")
    assert s.flavour == "mariadb" and str(s) == "0-1-42,2-5-7"
    assert "0-1-42" in s and "0-9-41" in s and "0-1-43" not in s and "1-1-1" not in s
    s.add("0-12-43")  # a promoted replica goes on in the same domain
    assert str(s) == "0-12-43,2-5-7" and "0-1-43" in s
    with pytest.raises(GtidError):
        s.without(["0-12-43"])  # MariaDB steps back with BINLOG_GTID_POS, not by arithmetic


def test_empty_and_bad_sets():
    assert GtidSet("").flavour is None and GtidSet(None).flavour is None and str(GtidSet("")) == ""
    for bad in ("nonsense", f"{U1}:0", f"{U1}:5-3", f"{U1}:1-3,0-1-5", "3e11fa47:1"):
        with pytest.raises(GtidError):
            GtidSet(bad)
    with pytest.raises(GtidError):
        GtidSet("0-1-5").add(f"{U1}:1")


def test_positions_carry_their_gtid_set_and_server_on_the_wire():
    at = Position("mysql-bin.000004", 1234, 2)
    record = Record(
        op="u",
        db="d",
        table="t",
        key={"id": 1},
        before={"id": 1},
        after={"id": 1},
        position=at,
        txn=Position.through("mysql-bin.000004", 1300),
        last=True,
        prev=None,
        seq=0,
        gtids=f"{U1}:1-42",
        server=U2,
    )
    back = Record.from_json(record.to_json())
    assert (back.gtids, back.server) == (f"{U1}:1-42", U2)
    beat = parse_control(Heartbeat(at, prev=at, seen_ms=5, gtids="0-1-9", server="server_id 1").to_json())
    assert (beat.gtids, beat.server) == ("0-1-9", "server_id 1")
    rebase = parse_control(Rebase(at, Position.through("mysql-bin.000001", 99), "0-1-9", "server_id 2").to_json())
    assert isinstance(rebase, Rebase) and rebase.prev == Position.through("mysql-bin.000001", 99)
    end = parse_control(
        End(
            batch="b",
            db="d",
            table="t",
            mode="full",
            position=at,
            parts=[],
            rows=0,
            checksum=0,
            gtids="0-1-9",
            server="server_id 1",
        ).to_json()
    )
    assert (end.gtids, end.server) == ("0-1-9", "server_id 1")
