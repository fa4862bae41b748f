"""What someone adds to a target table that refuses the source's rows: a unique index on a column that is not
unique at the source, a trigger that raises. The stream stops that table only, naming what refused and that
it goes first; a full load is rejected the same way, once (it said the configured key was not unique, and
loaded the table a second time); once it is removed, the repair printed takes the table up again."""

from __future__ import annotations

import os

import psycopg
import pytest

from seam.config import load_pipeline
from seam_dev import demo
from tests.support.commands import seam_command
from tests.support.independent import compare_pipeline
from tests.support.pipelines import loaded, stream_once
from tests.support.source import fresh_database

DB = "target_additions_test"
pytestmark = pytest.mark.stack


def _stopped(pipeline, db: str = DB) -> dict[str, str | None]:
    with psycopg.connect(**pipeline.target.conninfo()) as target:
        rows = target.execute(
            f"SELECT tbl, stopped FROM {pipeline.target.state_schema}.positions WHERE db = %s", (db,)
        ).fetchall()
    return dict(rows)


def test_an_index_or_trigger_added_to_the_target_stops_its_table_naming_it(stack, tmp_path_factory):
    fresh_database(
        DB,
        *(f"CREATE TABLE {DB}.{t} (id INT PRIMARY KEY, v INT)" for t in ("uniq", "trig", "plain")),
        *(f"INSERT INTO {DB}.{t} SELECT seq, seq FROM {DB}.seq_1_to_50" for t in ("uniq", "trig", "plain")),
    )
    tables = [{"name": f"{DB}.{t}", "key": ["id"]} for t in ("uniq", "trig", "plain")]
    with psycopg.connect(**load_pipeline().target.conninfo(), autocommit=True) as target:  # a run before left one
        target.execute(f"DROP SCHEMA IF EXISTS {DB} CASCADE")
    path, pipeline = loaded(tmp_path_factory, "target_additions", tables)
    stream_once(pipeline)
    with psycopg.connect(**pipeline.target.conninfo(), autocommit=True) as target:
        target.execute(f"CREATE UNIQUE INDEX reporting_v ON {DB}.uniq (v)")
        target.execute(
            "CREATE OR REPLACE FUNCTION target_additions_refuse() RETURNS trigger AS "
            "$$ BEGIN RAISE EXCEPTION 'read only'; END $$ LANGUAGE plpgsql"
        )
        target.execute(
            f"CREATE TRIGGER refuse BEFORE UPDATE ON {DB}.trig FOR EACH ROW EXECUTE FUNCTION target_additions_refuse()"
        )
    writer = demo.connect(os.environ["SEAM_MYSQL_URL"], DB)
    with writer.cursor() as cur:
        for table in ("uniq", "trig", "plain"):
            cur.execute(f"UPDATE {table} SET v = 7 WHERE id % 10 = 0")
    stream_once(pipeline)
    stopped = _stopped(pipeline)
    assert stopped["plain"] is None and compare_pipeline(pipeline, DB, "plain") is None, stopped
    assert "constraint or index 'reporting_v' is not the source's: remove it" in (stopped["uniq"] or ""), stopped
    assert "trigger (or rule) is not the source's: remove it" in (stopped["trig"] or ""), stopped

    refused = seam_command(path, "load", "full", f"{DB}.uniq")
    out = refused.stdout + refused.stderr
    assert refused.returncode != 0 and "the target table refuses its rows" in out and "reporting_v" in out, out
    assert "tables[].key" not in out and "loading it again" not in out, out

    with psycopg.connect(**pipeline.target.conninfo(), autocommit=True) as target:
        target.execute(f"DROP INDEX {DB}.reporting_v")
        target.execute(f"DROP TRIGGER refuse ON {DB}.trig")
    for table in ("uniq", "trig"):
        repaired = seam_command(path, "repair", f"{DB}.{table}")
        assert repaired.returncode == 0, repaired.stdout + repaired.stderr
    with writer.cursor() as cur:
        cur.execute("UPDATE uniq SET v = 8 WHERE id % 10 = 1")
    writer.close()
    stream_once(pipeline)
    assert set(_stopped(pipeline).values()) == {None}
    for table in ("uniq", "trig", "plain"):
        assert compare_pipeline(pipeline, DB, table) is None, table


def test_columns_users_add_to_a_target_table_stay_through_a_reload(stack, tmp_path_factory):
    """A column added to a target table (an audit time, a tag) was dropped without a word by the next full
    load's swap, and validation and repair refused the table until then. Now the table is refilled in place
    and keeps it (new rows take its default), validation and repair leave it be; one NOT NULL with no default
    refuses the rows, named, in the stream and in the load."""
    db = "target_columns_test"
    fresh_database(
        db,
        *(f"CREATE TABLE {db}.{t} (id INT PRIMARY KEY, v INT)" for t in ("kept", "strict")),
        *(f"INSERT INTO {db}.{t} SELECT seq, seq FROM {db}.seq_1_to_50" for t in ("kept", "strict")),
    )
    with psycopg.connect(**load_pipeline().target.conninfo(), autocommit=True) as target:
        target.execute(f"DROP SCHEMA IF EXISTS {db} CASCADE")
    tables = [{"name": f"{db}.{t}", "key": ["id"]} for t in ("kept", "strict")]
    path, pipeline = loaded(tmp_path_factory, "target_columns", tables)
    with psycopg.connect(**pipeline.target.conninfo(), autocommit=True) as target:
        target.execute(f"ALTER TABLE {db}.kept ADD COLUMN loaded_at timestamptz DEFAULT now(), ADD COLUMN tag text")
        target.execute(f"ALTER TABLE {db}.strict ADD COLUMN s text DEFAULT 's'")
        target.execute(f"ALTER TABLE {db}.strict ALTER COLUMN s SET NOT NULL, ALTER COLUMN s DROP DEFAULT")
    writer = demo.connect(os.environ["SEAM_MYSQL_URL"], db)
    with writer.cursor() as cur:
        for table in ("kept", "strict"):
            cur.execute(f"INSERT INTO {table} VALUES (100, 100)")
    writer.close()
    stream_once(pipeline)
    stopped = _stopped(pipeline, db)
    assert stopped["kept"] is None and compare_pipeline(pipeline, db, "kept") is None, stopped
    assert "NOT NULL on column 's' is not the source's: remove it" in (stopped["strict"] or ""), stopped

    reloaded = seam_command(path, "load", "full", f"{db}.kept")
    assert reloaded.returncode == 0, reloaded.stdout + reloaded.stderr
    assert compare_pipeline(pipeline, db, "kept") is None
    with psycopg.connect(**pipeline.target.conninfo()) as target:
        assert target.execute(f"SELECT count(*), count(loaded_at), count(tag) FROM {db}.kept").fetchone() == (51, 51, 0)
    with psycopg.connect(**pipeline.target.conninfo(), autocommit=True) as target:  # they are not compared
        target.execute(f"UPDATE {db}.kept SET v = -1, tag = 'mine' WHERE id = 7")
    checked = seam_command(path, "validate", f"{db}.kept")
    assert checked.returncode != 0 and f"{db}.kept: MISMATCH" in checked.stdout, checked.stdout + checked.stderr
    repaired = seam_command(path, "repair", f"{db}.kept")
    assert repaired.returncode == 0, repaired.stdout + repaired.stderr
    checked = seam_command(path, "validate", f"{db}.kept")
    assert checked.returncode == 0 and f"{db}.kept: EQUAL" in checked.stdout, checked.stdout + checked.stderr
    refused = seam_command(path, "load", "full", f"{db}.strict")
    out = refused.stdout + refused.stderr
    assert refused.returncode != 0 and "NOT NULL on column 's' is not the source's" in out, out


def test_a_target_table_dropped_renamed_or_narrowed_in_the_target_is_reloaded_as_printed(stack, tmp_path_factory):
    """Someone drops a target table, renames it away, drops one of its columns, narrows one's type, or has a
    view on a column the source drops, or adds the column the source adds next. The stream stopped each offering `seam repair`, which met the same
    error (or, for the DDL, does not follow it); and the reload of the renamed one was rejected (`relation
    "renamed_pkey" already exists`: the renamed table kept its key's name). Now each stop names what changed
    and offers the full load only, which takes every one of them up."""
    db = "target_changed_test"
    kinds = ("dropped", "renamed", "coldrop", "narrowed", "viewed", "twice")
    fresh_database(
        db,
        *(f"CREATE TABLE {db}.{t} (id INT PRIMARY KEY, v INT, s VARCHAR(10))" for t in kinds),
        *(f"INSERT INTO {db}.{t} SELECT seq, seq, 'x' FROM {db}.seq_1_to_50" for t in kinds),
    )
    with psycopg.connect(**load_pipeline().target.conninfo(), autocommit=True) as target:
        target.execute(f"DROP SCHEMA IF EXISTS {db} CASCADE")
    path, pipeline = loaded(tmp_path_factory, "target_changed", [{"name": f"{db}.{t}", "key": ["id"]} for t in kinds])
    with psycopg.connect(**pipeline.target.conninfo(), autocommit=True) as target:
        target.execute(f"DROP TABLE {db}.dropped")
        target.execute(f"ALTER TABLE {db}.renamed RENAME TO renamed_old")
        target.execute(f"ALTER TABLE {db}.coldrop DROP COLUMN s")
        target.execute(f"ALTER TABLE {db}.narrowed ALTER COLUMN v TYPE smallint")
        target.execute(f"CREATE VIEW {db}.viewed_s AS SELECT id, s FROM {db}.viewed")
        target.execute(f"ALTER TABLE {db}.twice ADD COLUMN note text")
    writer = demo.connect(os.environ["SEAM_MYSQL_URL"], db)
    with writer.cursor() as cur:
        cur.execute("ALTER TABLE viewed DROP COLUMN s")  # a DDL the target's view keeps it from following
        cur.execute("ALTER TABLE twice ADD COLUMN note VARCHAR(10)")  # a name the target has already
        for table in kinds:
            cur.execute(f"UPDATE {table} SET v = v + 100000 WHERE id % 5 = 0")
    writer.close()
    stream_once(pipeline)
    stopped = _stopped(pipeline, db)
    for table, said in (
        ("dropped", "the target table is gone"),
        ("renamed", "the target table is gone"),
        ("coldrop", "a column of the target table is gone"),
        ("narrowed", "narrower type in the target"),
        ("viewed", "views or rules in the target depend on the column: drop them first"),
        ("twice", "has a column of that name already (added in the target)"),
    ):
        assert said in (stopped[table] or "") and f"seam load full {db}.{table}`" in stopped[table], stopped
        assert "seam repair" not in stopped[table], stopped
    with psycopg.connect(**pipeline.target.conninfo(), autocommit=True) as target:
        target.execute(f"DROP VIEW {db}.viewed_s")
    reloaded = seam_command(path, "load", "full", *[f"{db}.{t}" for t in kinds])
    assert reloaded.returncode == 0, reloaded.stdout + reloaded.stderr
    stream_once(pipeline)
    assert set(_stopped(pipeline, db).values()) == {None}
    for table in kinds:
        assert compare_pipeline(pipeline, db, table) is None, table
