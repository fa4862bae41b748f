"""`seam load` shows Seam's own lines and keeps everything else (Spark's chatter) in its log file."""

from __future__ import annotations

import logging

from seam.load_output import LoadOutput

LINES = [
    (logging.WARNING, "WARNING: Using incubator modules: jdk.incubator.vector", False),
    (logging.WARNING, "26/11/25 21:12:13 WARN NativeCodeLoader: Unable to load native-hadoop library", False),
    (logging.INFO, "Using Spark's default log4j profile: org/apache/spark/log4j2-defaults.properties", False),
    (logging.INFO, "demo.payments: batch b1, 4 chunk(s) on id", True),
    (logging.INFO, "demo.payments_archive: not this table's line", False),
    (logging.INFO, "SEAM_RESULT table=demo.payments batch=b1 messages=10 position=f:4", True),
    (logging.INFO, "2026-11-25 21:08:49,484 seam.sink INFO batch b1 of demo.payments opened (full)", False),
    (logging.ERROR, "2026-11-25 21:08:49,484 seam.sink ERROR demo.payments: STOPPED: a reason", True),
    (logging.ERROR, "seam: source: demo.payments does not exist", True),
    (logging.ERROR, "java.lang.IllegalStateException: boom", False),
]


def test_seams_lines_are_shown_and_every_line_is_in_the_file(tmp_path):
    shown: list[str] = []
    output = LoadOutput(tmp_path / "logs" / "load.log", ["demo.payments"], echo=shown.append)
    for level, line, _ in LINES:
        output.log(level, "%s", line)
    output.close()
    assert shown == [line for _, line, show in LINES if show]
    assert (tmp_path / "logs" / "load.log").read_text().splitlines() == [line for _, line, _ in LINES]
    assert (tmp_path / "logs" / "load.log").stat().st_mode & 0o777 == 0o640
