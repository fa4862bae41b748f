"""What ``seam.source.rows.Stream`` relies on in python-mysql-replication beyond its public interface, pinned:
the release in requirements.txt, every private attribute and method of ``BinLogStreamReader`` that ``rows.py``
reads (found in its source, so a new use is checked too), and the order of ``BinLogPacketWrapper``'s
parameters, which ``Stream`` passes by position. A release that renames any of them fails here, not in a
stream."""

from __future__ import annotations

import inspect
import re
from importlib.metadata import version
from pathlib import Path

from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.packet import BinLogPacketWrapper

ROOT = Path(__file__).resolve().parents[2]
ROWS = (ROOT / "include" / "seam" / "source" / "rows.py").read_text()


def test_the_pinned_release_is_installed():
    pinned = re.search(r"^mysql-replication==(\S+)$", (ROOT / "requirements.txt").read_text(), re.M)
    assert pinned and version("mysql-replication") == pinned.group(1)


def test_every_private_name_rows_py_reads_exists_in_the_library():
    used = set(re.findall(r"_BinLogStreamReader__(\w+)", ROWS)) | set(
        re.findall(r"\b(?:p|_private)\(\"(\w+)\"\)", ROWS)
    )
    assert {"use_checksum", "connected_stream", "post_header_lengths", "allowed_events"} <= used
    reader = BinLogStreamReader(connection_settings={"host": "127.0.0.1"}, server_id=1)  # connects lazily
    missing = sorted(name for name in used if not hasattr(reader, f"_BinLogStreamReader__{name}"))
    assert not missing, missing
    for public in ("log_file", "log_pos", "end_log_pos", "table_map", "mysql_version", "close", "fetchone"):
        assert hasattr(reader, public), public


def test_the_packet_wrappers_parameters_are_in_the_order_stream_passes_them():
    assert list(inspect.signature(BinLogPacketWrapper.__init__).parameters) == [
        "self",
        "from_packet",
        "table_map",
        "ctl_connection",
        "mysql_version",
        "use_checksum",
        "allowed_events",
        "only_tables",
        "ignored_tables",
        "only_schemas",
        "ignored_schemas",
        "freeze_schema",
        "ignore_decode_errors",
        "verify_checksum",
        "optional_meta_data",
        "enable_logging",
        "use_column_name_cache",
        "post_header_lengths",
    ]
