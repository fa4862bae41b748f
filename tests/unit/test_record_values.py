"""Values the binlog decoder hands over in a form that differs from the stored one (no database needed)."""
from seam.records import normalize
from seam.schema import Column


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
