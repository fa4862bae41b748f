"""Which zero-date landing rows written into an existing target table get (``seam.apply.target.landing_in``):
a table not there yet and one whose NOT NULL date columns are NOT NULL take -infinity; one loaded while zero dates
landed as NULL (those columns nullable) keeps NULL until its next full load, so a keyless delete still finds its
rows by every value. On the real PostgreSQL catalog."""

from __future__ import annotations

import pytest

from seam.apply.target import Landing, create_table_sql, landing_in, target_table
from seam.core.identifiers import qi
from seam.core.schema import Column, TableSchema
from seam.state.connection import connect_target

pytestmark = pytest.mark.stack

SCHEMA = TableSchema(
    db="zero_landing_test",
    table="t",
    columns=(Column("id", "int", "int(11)", False), Column("d", "date", "date", False)),
    primary_key=("id",),
)


def test_the_landing_follows_the_tables_not_null(pipeline):
    conn = connect_target(pipeline)
    conn.autocommit = True
    target, landing = target_table(SCHEMA.db, SCHEMA.table), Landing()
    try:
        conn.execute(f"DROP SCHEMA IF EXISTS {qi(SCHEMA.db)} CASCADE")
        conn.execute(f"CREATE SCHEMA {qi(SCHEMA.db)}")
        assert landing_in(conn, target, SCHEMA, landing) == landing  # created with it
        conn.execute(create_table_sql(target, SCHEMA, ()))
        assert landing_in(conn, target, SCHEMA, landing).zero_dates == "-infinity"
        conn.execute(f"ALTER TABLE {target} ALTER COLUMN d DROP NOT NULL")
        assert landing_in(conn, target, SCHEMA, landing).zero_dates == "null"
        assert landing_in(conn, target, SCHEMA, Landing(zero_dates="null")).zero_dates == "null"
    finally:
        conn.execute(f"DROP SCHEMA IF EXISTS {qi(SCHEMA.db)} CASCADE")
        conn.close()
