"""The pipeline model: the source, the broker, the target, Spark, the tables and their checks, the nightly
settlement, as plain frozen values. ``seam.config`` reads them from a pipeline file and checks every field;
every room of Seam takes them as they are.

Delivery guarantee: none (values).
"""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from zoneinfo import ZoneInfo

from seam.core.errors import ConfigError

SEMANTICS = ("exactly-once", "at-least-once")
DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")


class Secret:
    """A credential: usable through ``reveal()``, shown as ``***`` everywhere else."""

    __slots__ = ("_value",)

    def __init__(self, value: str):
        self._value = value

    def reveal(self) -> str:
        return self._value

    def for_driver(self) -> Credential:
        """The value, for a driver's keyword arguments (``pymysql_kwargs``, ``conninfo``)."""
        return Credential(self._value)

    def __repr__(self) -> str:
        return "Secret('***')"

    __str__ = lambda self: "***"  # noqa: E731

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)


class Credential(str):
    """A secret's value handed to a driver: the string itself, but ``'***'`` in a ``repr``, so that a dict of
    connection arguments in a log line or in a failed test's report does not show it."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "'***'"


# Every source session's own settings, whatever the server's global ones are:
# - REPEATABLE READ: under a global READ COMMITTED (common), START TRANSACTION WITH CONSISTENT SNAPSHOT is no
#   snapshot at all, silently: each statement would see later commits than the position it was taken with.
# - no sql_select_limit: a DBA's global limit would cut every read short, the snapshot's chunks included.
# - a plain sql_mode: ANSI_QUOTES changes SHOW CREATE TABLE's quoting (read for cascades), ORACLE and
#   EMPTY_STRING_IS_NULL change CONCAT and '' (validation's checksums), PAD_CHAR_TO_FULL_LENGTH pads CHARs.
# - no statement time limit (MariaDB's max_statement_time, MySQL's max_execution_time): a snapshot's or a
#   checksum's read is long by design, and killed at the limit it would fail the same way on every retry.
# The comments run on one server kind each (MariaDB runs /*M!, MySQL 8 /*!80000, which MariaDB skips).
SESSION_SETTINGS = (
    "sql_mode = 'NO_ENGINE_SUBSTITUTION', sql_select_limit = 18446744073709551615"
    " /*M!100108 , max_statement_time = 0, tx_isolation = 'REPEATABLE-READ' */"
    " /*!80000 , max_execution_time = 0, transaction_isolation = 'REPEATABLE-READ' */"
)


@dataclass(frozen=True)
class MySQLSource:
    host: str
    port: int
    user: str
    password: Secret
    server_id: int = 5401
    snapshot: str = "auto"  # how full loads and validation take a snapshot's position: see seam.source.snapshot

    def pymysql_kwargs(self, utc: bool = False) -> dict[str, Any]:
        """PyMySQL's arguments (MySQLdb takes the same). ``utc``: TIMESTAMPs in UTC. Each session sets what a
        DBA's global setting would otherwise change under Seam's reads (``SESSION_SETTINGS``)."""
        setting = "time_zone = '+00:00', " if utc else ""
        return dict(
            host=self.host,
            port=self.port,
            user=self.user,
            password=self.password.for_driver(),
            charset="utf8mb4",
            init_command=f"SET SESSION {setting}{SESSION_SETTINGS}",
        )

    @property
    def jdbc_url(self) -> str:
        # jdbc:mysql:// keeps Spark's MySQL dialect (backtick quoting) with the
        # MariaDB driver; jdbc:mariadb:// makes Spark double-quote names.
        return f"jdbc:mysql://{self.host}:{self.port}/"


@dataclass(frozen=True)
class KafkaConfig:
    bootstrap: str
    topic_prefix: str = "seam"
    partitions: int = 1
    # back-pressure: what the change reader may have published that the sink has not applied, per table
    max_unapplied_events: int = 200_000
    max_unapplied_bytes: int = 256 * 1024 * 1024
    # the largest column value a row may carry (a LONGBLOB, a JSON document): messages, topics and consumers
    # are sized for it (``seam.wire.topics.message_limit``)
    max_value_bytes: int = 64 * 1024 * 1024


# target.text_nul: what a NUL character in MySQL text or JSON becomes in PostgreSQL
NUL_MAPPINGS = {"replace": "\ufffd", "strip": ""}
# target.zero_dates: what a zero date (0000-00-00, 2024-00-10, a zero TIMESTAMP) becomes in a column that is NOT NULL
# at the source; in a nullable one it is NULL either way (seam.apply.target)
ZERO_DATES = ("-infinity", "null")
STREAM_SINKS = ("spark", "direct")  # how `seam stream start` applies the topics (StreamConfig.sink)


@dataclass(frozen=True)
class PostgresTarget:
    host: str
    port: int
    database: str
    user: str
    password: Secret
    state_schema: str = "seam"
    # PostgreSQL text and jsonb cannot hold U+0000, which MySQL text can: what Seam writes instead
    # (seam.apply.decode: mapped at the sink, and by validation on the source side, the same way)
    text_nul: str = "replace"
    # "-infinity": NOT NULL DATE/DATETIME/TIMESTAMP columns stay NOT NULL and hold a zero date as -infinity;
    # "null": they are nullable in the target and hold it as NULL
    zero_dates: str = "-infinity"

    @property
    def nul_replacement(self) -> str:
        """What a NUL in a text or JSON value becomes: U+FFFD (``replace``) or nothing (``strip``)."""
        return NUL_MAPPINGS[self.text_nul]

    def conninfo(self) -> dict[str, Any]:
        """psycopg's arguments. Each session sets what a DBA's default (a role's, a database's, the server's)
        would otherwise change under Seam:

        - no statement_timeout or idle_in_transaction_session_timeout: a batch's COPY, a swap or a checksum is
          long by design, and cancelled at the limit it would fail the same way on every retry (waits for other
          sessions' locks stay bounded: the sink's lock_timeout);
        - how values are read and shown (DateStyle, TimeZone, IntervalStyle, extra_float_digits, bytea_output,
          standard_conforming_strings: off made a backslash in a string an escape, and changed streamed
          values that held one): the text Seam writes and the checksums validation compares are PostgreSQL's
          defaults;
        - READ COMMITTED unless Seam asks for more: a default of SERIALIZABLE fails the sink's concurrent
          transactions for nothing."""
        return dict(
            host=self.host,
            port=self.port,
            dbname=self.database,
            user=self.user,
            password=self.password.for_driver(),
            options="-c statement_timeout=0 -c idle_in_transaction_session_timeout=0 -c DateStyle=ISO,MDY "
            "-c TimeZone=UTC -c IntervalStyle=postgres -c extra_float_digits=1 -c bytea_output=hex "
            "-c default_transaction_isolation=read\\ committed -c standard_conforming_strings=on",
        )


@dataclass(frozen=True)
class StreamConfig:
    """How the stream is supervised (seam.supervise): the lag that fails the supervisor (and alerts), and
    where detached stream parts write their output (empty: ``$SEAM_STREAM_LOG_DIR``, else ~/.seam/logs); and
    how much of one source transaction its parts hold in memory."""

    max_lag_seconds: float = 300.0
    log_dir: str = ""
    # of one source transaction, in the change reader and in the sink; the rest spills to a temporary file
    # (reader) or to a temporary table in the target (sink)
    max_transaction_memory: int = 64 * 1024 * 1024
    # the detached sink: the apply code fed by a plain Kafka consumer in one Python process (``direct``), or a
    # Structured Streaming query (``spark``, spark-submit) around the same code; direct by default: its work is
    # the driver's either way, and Spark's micro-batch only adds latency and memory (benchmarks/README.md)
    sink: str = "direct"


@dataclass(frozen=True)
class SparkConfig:
    master: str = "local[2]"
    jdbc_jar: str = "/usr/share/java/mariadb-java-client.jar"
    jdbc_driver: str = "org.mariadb.jdbc.Driver"
    partitions: int = 4
    # a table of fewer rows than partitions * min_chunk_rows is read in fewer chunks (one below min_chunk_rows)
    min_chunk_rows: int = 50_000
    # tables one load's Spark application publishes at once (their jobs share its executors)
    max_parallel_tables: int = 8
    # a load's Spark job runs in the shared driver this long after its last job (seam.spark_driver); 0: spark-submit
    shared_driver_idle_s: int = 600
    # shared drivers a local master may keep (a load that finds them all busy runs spark-submit); a cluster's: one
    shared_drivers: int = 2


@dataclass(frozen=True)
class TableConfig:
    db: str
    table: str
    key: tuple[str, ...]  # empty: keyless table, the whole row identifies it
    cursor: str | None = None
    safety_delay_s: float = 30.0
    semantics: str = "exactly-once"
    soft_delete: str | None = None
    incremental: bool = False  # kept current by windows (``sync: windows``), else by the stream
    # validation checks as data: {"count": bool, "checksum": bool, "columns": {col: {"sum": {}, "null_count":
    # {"equal_to": 0}}}}; a column check compares source and target, ``equal_to`` also pins the target's value
    checks: Mapping[str, Any] = field(default_factory=dict)

    @functools.cached_property  # asked per change by the reader; kept in the instance's dict, frozen all the same
    def name(self) -> str:
        return f"{self.db}.{self.table}"

    @property
    def cursor_column(self) -> str:
        """The cursor, for what needs one (windows, a validation scope): a clear error for a table without."""
        if not self.cursor:
            raise ConfigError(f"tables[{self.name}].cursor", "this table has no cursor: give it one (e.g. updated_at)")
        return self.cursor

    @property
    def keyless(self) -> bool:
        return not self.key

    @property
    def sync(self) -> str:
        """How the target is kept current between full loads: ``stream`` (binlog) or ``windows``."""
        return "windows" if self.incremental else "stream"


@dataclass(frozen=True)
class LoadConfig:
    """Loads as the sink sees them: a batch none of whose rows arrived for ``abandon_after`` seconds belongs
    to a load that is gone (killed with its whole process tree, its machine lost) and is abandoned."""

    abandon_after: float = 900.0


@dataclass(frozen=True)
class RepairConfig:
    """``seam repair`` (seam.repair): a repair that finds more differing rows than ``max_rows`` in a table
    changes nothing and says to load the table in full. ``after_cutover``: the streaming sink repairs a table
    stopped at an online schema change's cut-over by itself (``seam.cli.cutover_repairs``)."""

    max_rows: int = 100_000
    after_cutover: bool = True


@dataclass(frozen=True)
class Pipeline:
    name: str
    source: MySQLSource
    kafka: KafkaConfig
    target: PostgresTarget
    spark: SparkConfig
    tables: tuple[TableConfig, ...]
    path: str = ""
    notify: Mapping[str, Any] = field(default_factory=dict)
    stream: StreamConfig = field(default_factory=StreamConfig)
    load: LoadConfig = field(default_factory=LoadConfig)
    repair: RepairConfig = field(default_factory=RepairConfig)
    settlement: Settlement | None = None  # the nightly settlement, if the file has one

    def table(self, ref: str) -> TableConfig:
        """Find a table by ``db.table`` or by a table name unique in the pipeline."""
        exact = [t for t in self.tables if t.name == ref]
        if exact:
            return exact[0]
        by_name = [t for t in self.tables if t.table == ref]
        if len(by_name) == 1:
            return by_name[0]
        known = ", ".join(t.name for t in self.tables)
        if len(by_name) > 1:
            raise ConfigError("tables", f"'{ref}' is ambiguous; use one of: {known}", self.path)
        raise ConfigError("tables", f"no table '{ref}' in this pipeline; known tables: {known}", self.path)


@dataclass(frozen=True)
class Settlement:
    schedule: str
    timezone: str
    source_timezone: str
    business_days: tuple[int, ...]  # Monday 0
    holidays: frozenset[dt.date]
    tables: tuple[str, ...]

    def settled_day(self, at: dt.datetime) -> dt.date:
        """The last business day before ``at``'s date in the settlement time zone."""
        day = at.astimezone(ZoneInfo(self.timezone)).date() - dt.timedelta(days=1)
        while day.weekday() not in self.business_days or day in self.holidays:
            day -= dt.timedelta(days=1)
        return day

    def window(self, day: dt.date) -> tuple[str, str]:
        """(start, end] of ``day`` for the cursor: midnight to midnight in the settlement time zone, written
        as naive timestamps in the source's time zone."""
        zone, source = ZoneInfo(self.timezone), ZoneInfo(self.source_timezone)
        start = dt.datetime.combine(day, dt.time(), zone)
        end = dt.datetime.combine(day + dt.timedelta(days=1), dt.time(), zone)
        return (_local(start, source), _local(end, source))

    def day_end(self, day: dt.date) -> dt.datetime:
        return dt.datetime.combine(day + dt.timedelta(days=1), dt.time(), ZoneInfo(self.timezone))


def _local(moment: dt.datetime, zone) -> str:
    return moment.astimezone(zone).replace(tzinfo=None).isoformat(sep=" ")
