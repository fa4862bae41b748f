"""Pipeline files for tests: the demo pipeline with other tables, topics and notifiers."""

from __future__ import annotations

import itertools
import os

import psycopg
import yaml

from seam.config import load_pipeline
from seam.core.pipeline import Pipeline
from tests.support.commands import seam_command

# Each pipeline file of a lane gets a replication server id of its own, above the lane's (SEAM_SERVER_ID, see
# tests/conftest.py): a reader one test leaves running then cannot take over the next test's reader, or be taken
# over by it (seen in CI: two readers of one id drop each other's connection).
_PIPELINE_IDS = itertools.count()


def pipeline_file(tmp_path_factory, name: str, tables: list[dict], pipeline_name: str | None = None, **top) -> str:
    """A copy of the default pipeline with ``tables``, its own topic prefix, its own server id, and top-level
    overrides (``pipeline_name``: the pipeline's own name, which keys its stream parts)."""
    doc = yaml.safe_load(open(load_pipeline().path))
    doc["tables"] = tables
    if pipeline_name:
        doc["name"] = pipeline_name
    doc["kafka"]["topic_prefix"] = f"seam.{name}"
    lane_id = int(os.environ.get("SEAM_SERVER_ID", "5401"))
    doc["source"]["server_id"] = lane_id + 500 + next(_PIPELINE_IDS) % 400
    doc.update(top)
    path = tmp_path_factory.mktemp(name) / "pipeline.yaml"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def one_core_spark(partitions: int) -> dict:
    """The default pipeline's ``spark`` section on one core, in ``partitions`` chunks: the chunks are read one
    after the other, so that a test can act between them."""
    spark = yaml.safe_load(open(load_pipeline().path))["spark"]
    spark.update(partitions=partitions, master="local[1]")
    return spark


def read_once(pipeline) -> dict:
    """The change reader up to the binlog's end, in this process; returns its counts (transactions, changes,
    rewinds)."""
    from seam.source.streaming import ChangeReader

    reader = ChangeReader(pipeline)
    try:
        return reader.run(until_idle=True)
    finally:
        reader.close()


def stream_once(pipeline) -> dict:
    """The change reader up to the binlog's end, then the sink up to the end of every topic (both in this
    process); returns the reader's counts (transactions, changes, rewinds)."""
    from seam.apply.sink import Sink

    stats = read_once(pipeline)
    sink = Sink(pipeline)
    try:
        sink.run(caught_up=True)
    finally:
        sink.close()
    return stats


def loaded(tmp_path_factory, name: str, tables: list[dict]) -> tuple[str, Pipeline]:
    """A pipeline file of ``tables`` (``pipeline_file``) after one `seam load full` of them, which must succeed:
    its path and its pipeline."""
    path = pipeline_file(tmp_path_factory, name, tables)
    result = seam_command(path, "load", "full", *[t["name"] for t in tables])
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return path, load_pipeline(path)


def stopped_tables(pipeline, db: str) -> dict:
    """Each table of ``db`` with a position in the target's state: why its stream stopped, or None."""
    with psycopg.connect(**pipeline.target.conninfo()) as conn:
        return dict(
            conn.execute(f"SELECT tbl, stopped FROM {pipeline.target.state_schema}.positions WHERE db = %s", (db,))
        )
