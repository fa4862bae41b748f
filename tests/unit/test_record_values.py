"""Values the binlog decoder hands over in a form that differs from the stored one (no database needed)."""

from seam.core.schema import Column
from seam.wire.records import normalize


def test_year_zero_from_the_binlog_is_zero():
    """python-mysql-replication decodes a stored YEAR 0000 as 1900, a value YEAR cannot hold (1901-2155)."""
    year = Column("y", "year", "year(4)", True)
    assert normalize(year, 1900) == 0 and normalize(year, 0) == 0 and normalize(year, 2155) == 2155


def test_set_members_keep_their_case():
    features = Column("f", "set", "set('Trailers','Deleted Scenes','Größe')", True)
    assert normalize(features, {"Größe", "Trailers"}) == "Trailers,Größe"
    assert normalize(features, "Deleted Scenes,Trailers") == "Trailers,Deleted Scenes"
    assert normalize(features, "") == ""
    rating = Column("r", "enum", "enum('G','NC-17','Ünrated')", False)
    assert normalize(rating, 3) == "Ünrated" and normalize(rating, "NC-17") == "NC-17"


def test_float_is_the_stored_single_precision_value_from_text_or_binlog():
    f = Column("f", "float", "float", True)
    assert normalize(f, 0.1) == normalize(f, "0.1") == 0.10000000149011612  # a driver's text, the binlog's float32
    assert normalize(f, 16777217) == 16777216.0


def test_spatial_values_and_postgis_ewkb_round_trip():
    from seam.wire.binary_forms import ewkb_hex as _ewkb_hex
    from seam.wire.binary_forms import ewkb_to_record as _ewkb_to_record
    from seam.wire.binary_forms import stored_bytes as _stored

    g = Column("g", "point", "point", True)
    stored = bytes.fromhex("e6100000" + "0101000000" + "000000000000f83f" + "00000000000000c0")  # SRID 4326, (1.5 -2)
    value = normalize(g, stored)
    assert value == {"wkb": "AQEAAAAAAAAAAAD4PwAAAAAAAADA", "srid": 4326}
    assert _ewkb_hex(value) == "0101000020e6100000000000000000f83f00000000000000c0"  # PostGIS's EWKB for it
    assert _ewkb_to_record(bytes.fromhex(_ewkb_hex(value))) == value and _stored(value) == stored


def test_window_bounds_reach_sql_only_as_formatted_timestamps():
    import pytest

    from seam.source.incremental import IncrementalError, Window, check_time_bounds

    check_time_bounds(Window("c", "2026-11-21 00:00:00.000000", "2026-11-22 00:00:00.000000", "x", False))
    with pytest.raises(IncrementalError, match="bad window bound"):
        check_time_bounds(Window("c", "2026-11-21 00:00:00.000000", "2026-11-22' OR 1=1 --", "x", False))


def test_a_type_seam_cannot_map_names_the_column():
    import pytest

    from seam.core.errors import TargetError
    from seam.wire.codecs import codec

    with pytest.raises(TargetError, match="column 'v' has MySQL type vector.*does not map"):
        codec(Column("v", "vector", "vector(3)", True))
