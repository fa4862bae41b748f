"""Repair, not reload (issue 33), measured against the reload it replaces:

- ``repair``: a table of N rows (2,000,000 by default) fully loaded; 10 of its target rows deleted, changed and
  added behind Seam's back; ``seam repair`` (compare, copy the 10 rows again, go on) against ``seam load full``
  of the same table, wall time of each command. The repair must find exactly those 10 keys.
- ``resume``: a table of M rows (5,000,000 by default): a clean ``seam load full``, against a load killed (every
  process of it, SIGKILL) when about 60% of its rows are on the topic and then started again: the second
  command's wall time, and its ``resumed: K of N chunks kept``.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

DB = "bench_repair"


def ensure_table(name: str, rows: int) -> None:
    """``bench_repair.<name>`` with ``rows`` rows (id, amount, note, day), made once per size."""
    from seam_dev import demo

    conn = demo.connect(os.environ["SEAM_MYSQL_URL"])
    try:
        with conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE IF NOT EXISTS `{DB}`")
            cur.execute(
                "SELECT TABLE_ROWS FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s",
                (DB, name),
            )
            found = cur.fetchone()
            if found is not None:
                cur.execute(f"SELECT count(*) FROM `{DB}`.`{name}`")
                if cur.fetchone()[0] == rows:
                    return
            cur.execute(f"DROP TABLE IF EXISTS `{DB}`.`{name}`")
            cur.execute(
                f"CREATE TABLE `{DB}`.`{name}` (id BIGINT PRIMARY KEY, amount DECIMAL(18,2) NOT NULL, "
                "note VARCHAR(64), day DATE NOT NULL)"
            )
            step = 200_000
            for lo in range(1, rows + 1, step):
                hi = min(rows, lo + step - 1)
                cur.execute(
                    f"INSERT INTO `{DB}`.`{name}` SELECT seq, seq / 100, CONCAT('row ', seq), "
                    f"'2026-01-01' + INTERVAL seq % 365 DAY FROM `{DB}`.seq_{lo}_to_{hi}"
                )
        conn.commit()
    finally:
        conn.close()


def seam(path: str, *args: str) -> tuple[float, str]:
    """Wall seconds and output of one ``seam`` command (it must succeed)."""
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "seam.cli", "--pipeline", path, *args], capture_output=True, text=True, timeout=3600
    )
    if done.returncode != 0:
        sys.exit(f"seam {' '.join(args)} failed: {done.stdout[-2000:]}{done.stderr[-2000:]}")
    return time.perf_counter() - started, done.stdout


def tamper(pipeline, name: str, rows: int) -> set[str]:
    """10 target rows made different behind Seam's back (3 deleted, 4 changed, 3 added); their keys."""
    import psycopg

    step = max(1, rows // 12)
    gone, changed = [step * i for i in (1, 2, 3)], [step * i for i in (4, 5, 6, 7)]
    added = [rows + 1000 + i for i in range(3)]
    with psycopg.connect(**pipeline.target.conninfo(), autocommit=True) as conn:
        table = f'"{DB}"."{name}"'
        conn.execute(f"DELETE FROM {table} WHERE id = ANY(%s)", (gone,))
        conn.execute(f"UPDATE {table} SET note = 'tampered' WHERE id = ANY(%s)", (changed,))
        for key in added:
            conn.execute(f"INSERT INTO {table} SELECT %s, amount, note, day FROM {table} WHERE id = 1", (key,))
    return {str(k) for k in gone + changed + added}


def tamper_scattered(pipeline, name: str, rows: int, n: int) -> None:
    """``n`` target rows made different behind Seam's back, spread evenly over the table (a third deleted, a
    third changed, the rest added after its last key): a bucket of its own for each, about."""
    import psycopg

    step = max(1, rows // (2 * (n // 3) + 1))
    keys = [step * (i + 1) for i in range(2 * (n // 3))]
    gone, changed = keys[0::2], keys[1::2]
    added = [rows + 1000 + i for i in range(n - len(keys))]
    with psycopg.connect(**pipeline.target.conninfo(), autocommit=True) as conn:
        table = f'"{DB}"."{name}"'
        conn.execute(f"DELETE FROM {table} WHERE id = ANY(%s)", (gone,))
        conn.execute(f"UPDATE {table} SET note = 'tampered' WHERE id = ANY(%s)", (changed,))
        conn.execute(
            f"INSERT INTO {table} SELECT k, amount, note, day FROM {table}, unnest(%s::bigint[]) k WHERE id = 1",
            (added,),
        )


def repair_run(path: str, pipeline, name: str, rows: int, scattered: int = 0) -> tuple[float, int]:
    """Seconds of `seam repair` after 10 rows (or ``scattered`` rows all over the table) were tampered with,
    and the differing rows it found."""
    if scattered:
        tamper_scattered(pipeline, name, rows, scattered)
    else:
        tamper(pipeline, name, rows)
    seconds, out = seam(path, "repair", f"{DB}.{name}")
    found = re.search(r"([\d,]+) differing row\(s\) found", out)
    return seconds, int(found.group(1).replace(",", "")) if found else -1


def killed_then_resumed(path: str, pipeline, name: str, rows: int, at: float = 0.6) -> tuple[float, str]:
    """Start a full load, SIGKILL every process of it when about ``at`` of its rows are published (the Spark
    job's progress; the sink stages behind it), start it again: the second command's seconds and its
    ``resumed: K of N chunks kept``."""
    from seam_dev.topic_rows import rows_published, topic_end

    first = subprocess.Popen(
        [sys.executable, "-m", "seam.cli", "--pipeline", path, "load", "full", f"{DB}.{name}", "--restart"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    before = topic_end(pipeline, topic(pipeline, name))
    while rows_published(pipeline, topic(pipeline, name), before) < rows * at and first.poll() is None:
        time.sleep(0.05)
    if first.poll() is not None:
        sys.exit("the load finished before it could be killed")
    kill_all(path)
    first.wait(30)
    seconds, out = seam(path, "load", "full", f"{DB}.{name}")
    kept = re.search(r"resumed: \d+ of \d+ chunks kept", out)
    return seconds, kept.group(0) if kept else "not resumed"


def topic(pipeline, name: str) -> str:
    from seam.wire.topics import table_topic

    return table_topic(pipeline, pipeline.table(f"{DB}.{name}"))


def kill_all(marker: str) -> None:
    """SIGKILL every process whose command line names ``marker``: the load and its sink (and a Spark job
    spark-submitted for it), as a killed Airflow task leaves it. Not the shared Spark driver, which serves every
    load of the pipeline and may have been started by any of them (its command line names the first one's
    pipeline): it cancels the killed load's job itself, and the load started again finds it warm."""
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            text = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
            pid = int(cmdline.parent.name)
            if marker in text and pid != os.getpid() and "spark_driver.py" not in text:
                os.kill(pid, signal.SIGKILL)
        except (OSError, ValueError):
            continue
