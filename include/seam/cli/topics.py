"""``seam sink|kafka|quarantine``: a sink in the foreground, what is on the broker, and the messages the sink
would not apply.

Delivery guarantee: that of ``seam.apply.sink`` (a sink run here applies exactly once)."""

from __future__ import annotations

import logging
import signal
import time

from seam.apply import TopicTaken
from seam.apply.sink import Sink
from seam.cli.common import pipeline_of
from seam.core.errors import ConfigError
from seam.processes import Processes
from seam.state import quarantine
from seam.state.connection import connect_state
from seam.wire.boundary import block_records
from seam.wire.topics import list_topics, table_topic, tail


def cmd_sink(args, procs: Processes) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    pipeline = pipeline_of(args)
    tables = [pipeline.table(t) for t in args.table] if args.table else list(pipeline.tables)
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    try:
        sink = Sink(pipeline, tables)
    except TopicTaken as exc:
        if not args.until_batch:
            raise
        # a load's or a repair's own sink, started as the stream's sink (re)started: that one applies them
        print(
            f"topic {exc.topic} is applied by {exc.holder}: it applies batch {', '.join(args.until_batch)}", flush=True
        )
        return 0
    try:
        finished = sink.run(
            until_batches=set(args.until_batch) or None,
            idle_exit=args.idle_exit,
            deadline=time.time() + args.timeout if args.timeout else None,
            should_stop=lambda: bool(stopping),
            stream_part=args.stream_part,
        )
    finally:
        sink.close()
    for batch, state in sorted(finished.items()):
        print(f"batch {batch}: {state}", flush=True)
    return 0


def cmd_kafka(args, procs: Processes) -> int:
    """`seam kafka topics` and `seam kafka tail TOPIC`: what is on the broker, without kcat (which cannot
    talk to the embedded broker)."""
    pipeline = pipeline_of(args)
    if args.action == "topics":
        ours = {f"{pipeline.kafka.topic_prefix}."}
        for name, partitions in list_topics(pipeline):
            mine = "  (this pipeline)" if any(name.startswith(p) for p in ours) else ""
            print(f"{name}  partitions={partitions}{mine}")
        return 0
    if not args.topic:
        raise ConfigError("kafka", "name the topic to tail: seam kafka tail TOPIC (`seam kafka topics` lists them)")
    stopping: list[bool] = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    for offset, key, control, value in tail(pipeline, args.topic, args.n, args.follow, lambda: bool(stopping)):
        records = block_records(key, value)  # a load's rows, many to a message: said so, with the first record
        shown = records[0] if records else value
        text = shown.decode("utf-8", "replace") if shown is not None else "null"
        if not args.full and len(text) > 300:
            text = text[:299] + "…"
        if records is not None:
            text = f"[{len(records):,} rows, the first:] {text}"
        kind = "CONTROL" if control else "rows" if records is not None else "record"
        print(f"{offset:>10} {kind:7} key={key.decode('utf-8', 'replace') if key else '-'} {text}", flush=True)
    return 0


def cmd_quarantine(args, procs: Processes) -> int:
    """`seam quarantine list|show ID|skip ID`: the messages the sink would not apply, and the decision on one."""
    pipeline = pipeline_of(args)
    if args.action != "list" and args.id is None:
        raise ConfigError("quarantine", f"name the message: seam quarantine {args.action} ID (`seam quarantine list`)")
    conn = connect_state(pipeline)
    try:
        schema = pipeline.target.state_schema
        if args.action == "list":
            topics = [table_topic(pipeline, t) for t in pipeline.tables]
            found = quarantine.listed(conn, schema, topics, all_=args.all)
            if not found:
                print("no quarantined messages" + ("" if args.all else " waiting for a decision"))
            for item in found:
                decided = f"  skipped {item.skipped_at:%Y-%m-%d %H:%M} by {item.skipped_by}" if item.skipped_at else ""
                print(
                    f"#{item.id:<5} {item.name:30} {item.topic}:{item.offset}  "
                    f"{item.quarantined_at:%Y-%m-%d %H:%M:%S}  {item.reason}{decided}"
                )
            return 1 if any(item.skipped_at is None for item in found) else 0
        q = quarantine.get(conn, schema, args.id)
        if q is None:
            raise ConfigError("quarantine", f"no quarantined message #{args.id} (`seam quarantine list --all`)")
        if args.action == "show":
            value = q.value or b""
            print(f"#{q.id} {q.name}: {q.topic} partition {q.partition} offset {q.offset}, at {q.quarantined_at}")
            print(f"reason: {q.reason}")
            print(f"key:    {q.key!r}")
            print(f"value:  {len(value):,} bytes: {value[:2000].decode('utf-8', 'replace')}")
            if q.skipped_at:
                print(f"skipped {q.skipped_at} by {q.skipped_by}" + (f": {q.note}" if q.note else ""))
            return 0
        with conn.transaction():
            goes_on = quarantine.skip(conn, schema, args.id, args.note)
        print(
            f"#{q.id} skipped; {q.name} "
            + (
                "goes on: the stream publishes its changes again from the applied position"
                if goes_on
                else "stays stopped (other quarantined messages, or another stop: `seam stream status`)"
            )
        )
        return 0
    finally:
        conn.close()
