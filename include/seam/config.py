"""Pipeline configuration: one YAML file names the source, Kafka, the target
and the tables to sync; the values it makes are ``seam.core.pipeline``'s.

The whole file is validated in one pass, one function per section, so that a bad file fails on its first
fault, naming the field.

Loading validates everything up front and raises ``ConfigError`` naming the
exact field at fault (``tables[2].cursor``), so a bad file never starts a
half-configured job. Values may reference the environment as ``${VAR}`` or
``${VAR:-default}``; password fields become ``Secret`` values that never print.

Delivery guarantee: none (pure parsing, no I/O besides reading the file).
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, overload

import yaml

from seam import settlement as settlement_section
from seam.core.errors import ConfigError
from seam.core.pipeline import (
    NUL_MAPPINGS,
    SEMANTICS,
    STREAM_SINKS,
    ZERO_DATES,
    KafkaConfig,
    LoadConfig,
    MySQLSource,
    Pipeline,
    PostgresTarget,
    RepairConfig,
    Secret,
    SparkConfig,
    StreamConfig,
    TableConfig,
)


def _checkout() -> Path | None:
    """The Seam checkout this package runs from, or None for an installed ``seam`` (which needs none)."""
    root = Path(__file__).resolve().parents[2]
    return root if (root / "include" / "seam").is_dir() and (root / "spark_jobs").is_dir() else None


CHECKOUT = _checkout()
DEFAULT_PIPELINE = (CHECKOUT or Path.cwd()) / "include" / "pipelines" / "demo.yaml"


def state_dir() -> Path:
    """Where local state lives (PID files, logs, stream checkpoints, reports): ``SEAM_STATE_DIR``, else
    ``.seam`` in the checkout, or in the working directory of an installed ``seam``."""
    return Path(os.environ.get("SEAM_STATE_DIR") or (CHECKOUT or Path.cwd()) / ".seam").resolve()


_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
_IDENT = re.compile(r"^[^\x00/\\.]{1,64}$")  # MySQL allows nearly anything in quotes


# ---------------------------------------------------------------- parsing ----


class _Reader:
    """Walks the raw YAML mapping, recording the dotted path for errors."""

    def __init__(self, source: str, env: Mapping[str, str]):
        self.source = source
        self.env = env

    def fail(self, path: str, message: str) -> ConfigError:
        return ConfigError(path, message, self.source)

    def mapping(self, value: Any, path: str, allowed: tuple[str, ...], required: tuple[str, ...] = ()) -> dict:
        if not isinstance(value, dict):
            raise self.fail(path, f"must be a mapping, got {type(value).__name__}")
        for key in value:
            if key not in allowed:
                hint = difflib.get_close_matches(str(key), allowed, n=1)
                suggestion = f" (did you mean '{hint[0]}'?)" if hint else f" (allowed: {', '.join(allowed)})"
                raise self.fail(_join(path, key), f"unknown key{suggestion}")
        for key in required:
            if value.get(key) in (None, ""):
                raise self.fail(_join(path, key), "is required")
        return value

    def expand(self, value: Any, path: str) -> Any:
        if not isinstance(value, str):
            return value

        def substitute(match: re.Match) -> str:
            var, default = match.group(1), match.group(2)
            if var in self.env:
                return self.env[var]
            if default is not None:
                return default
            raise self.fail(
                path,
                f"environment variable {var} is not set "
                '(export it, or run `seam up` / `eval "$(seam env)"` for the embedded stack)',
            )

        return _ENV_REF.sub(substitute, value)

    @overload
    def string(self, raw: dict, key: str, path: str, default: str) -> str: ...
    @overload
    def string(self, raw: dict, key: str, path: str, default: None = None) -> str | None: ...
    def string(self, raw: dict, key: str, path: str, default: str | None = None) -> str | None:
        value = self.expand(raw.get(key, default), _join(path, key))
        if value is None:
            return None
        if not isinstance(value, (str, int)) or isinstance(value, bool):
            raise self.fail(_join(path, key), f"must be a string, got {type(value).__name__}")
        return str(value)

    def required(self, raw: dict, key: str, path: str) -> str:
        value = self.string(raw, key, path)
        if not value:
            raise self.fail(_join(path, key), "is required")
        return value

    def integer(self, raw: dict, key: str, path: str, default: int, lo: int, hi: int, what: str = "a number") -> int:
        value = self.expand(raw.get(key, default), _join(path, key))
        try:
            number = int(str(value).strip())
        except ValueError:
            raise self.fail(_join(path, key), f"'{value}' is not {what}") from None
        if not lo <= number <= hi:
            raise self.fail(_join(path, key), f"{number} is out of range for {what} ({lo}-{hi})")
        return number

    def port(self, raw: dict, key: str, path: str, default: int) -> int:
        return self.integer(raw, key, path, default, 1, 65535, "a port")

    def secret(self, raw: dict, key: str, path: str) -> Secret:
        value = self.string(raw, key, path, default="")
        return Secret(value or "")


def _flag(r, raw: dict, key: str, path: str, default: bool) -> bool:
    value = raw.get(key, default)
    if not isinstance(value, bool):
        raise r.fail(_join(path, key), f"must be true or false, got {value!r}")
    return value


def _join(path: str, key: Any) -> str:
    return f"{path}.{key}" if path else str(key)


def parse_duration(value: Any) -> float:
    """'30s', '1m', '500ms', '2h' or a bare number of seconds -> seconds."""
    if isinstance(value, bool):
        raise ValueError(value)
    if isinstance(value, (int, float)):
        if value < 0:
            raise ValueError(value)
        return float(value)
    match = _DURATION.match(str(value))
    if not match:
        raise ValueError(value)
    number, unit = float(match.group(1)), match.group(2) or "s"
    return number * {"ms": 0.001, "s": 1, "m": 60, "h": 3600}[unit]


SNAPSHOT_METHODS = ("auto", "mariadb", "portable")
_TOP = (
    "version",
    "name",
    "source",
    "kafka",
    "target",
    "spark",
    "defaults",
    "tables",
    "notify",
    "stream",
    "load",
    "repair",
    "settlement",
)
_STREAM = ("max_lag_seconds", "log_dir", "max_transaction_memory", "sink")
_LOAD = ("abandon_after",)
_REPAIR = ("max_rows", "after_cutover")
_SOURCE = ("type", "host", "port", "user", "password", "server_id", "snapshot")
_KAFKA = ("bootstrap", "topic_prefix", "partitions", "max_unapplied_events", "max_unapplied_bytes", "max_value_bytes")
_TARGET = ("type", "host", "port", "database", "user", "password", "state_schema", "text_nul", "zero_dates")
_SPARK = (
    "master",
    "jdbc_jar",
    "jdbc_driver",
    "partitions",
    "min_chunk_rows",
    "max_parallel_tables",
    "shared_driver_idle_s",
    "shared_drivers",
)
_DEFAULTS = ("safety_delay", "semantics")
_TABLE = ("name", "key", "cursor", "safety_delay", "semantics", "soft_delete", "sync", "incremental", "checks")
_CHECKS = ("count", "checksum", "columns")
_COLUMN_CHECKS = ("sum", "null_count")
_NOTIFY_EMAIL = ("to", "conn_id", "subject", "from")
_NOTIFY = ("email", "webhook")


def load_pipeline(path: str | os.PathLike | None = None, env: Mapping[str, str] | None = None) -> Pipeline:
    """Read and validate a pipeline file; raise ``ConfigError`` on the first fault."""
    given = bool(path)
    path = Path(path) if path else DEFAULT_PIPELINE
    if not path.is_absolute() and not path.is_file() and CHECKOUT and (CHECKOUT / path).is_file():
        path = CHECKOUT / path  # a path relative to the checkout, from wherever it runs (an Airflow task)
    source = str(path)
    if not path.is_file():
        hint = "" if given else " (no pipeline given: pass --pipeline PATH)"
        raise ConfigError("pipeline", f"file not found: {path}{hint}", None)
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark else "file"
        raise ConfigError(where, f"not valid YAML: {getattr(exc, 'problem', exc)}", source) from None
    return parse_pipeline(raw, source=source, env=os.environ if env is None else env)


def parse_pipeline(raw: Any, source: str = "<pipeline>", env: Mapping[str, str] | None = None) -> Pipeline:
    r = _Reader(source, os.environ if env is None else env)
    top = r.mapping(raw, "", _TOP, required=("source", "kafka", "target", "tables"))
    version = top.get("version", 1)
    if version != 1:
        raise r.fail("version", f"unsupported version {version!r}; this Seam reads version 1")
    mysql, kafka, target = _source(r, top["source"]), _kafka(r, top["kafka"]), _target(r, top["target"])
    spk = r.mapping(top.get("spark") or {}, "spark", _SPARK)
    spark = SparkConfig(
        master=r.string(spk, "master", "spark", SparkConfig.master),
        jdbc_jar=r.string(spk, "jdbc_jar", "spark", SparkConfig.jdbc_jar),
        jdbc_driver=r.string(spk, "jdbc_driver", "spark", SparkConfig.jdbc_driver),
        partitions=r.integer(spk, "partitions", "spark", SparkConfig.partitions, 1, 4096),
        min_chunk_rows=r.integer(spk, "min_chunk_rows", "spark", SparkConfig.min_chunk_rows, 1, 100_000_000),
        max_parallel_tables=r.integer(spk, "max_parallel_tables", "spark", SparkConfig.max_parallel_tables, 1, 64),
        shared_driver_idle_s=r.integer(
            spk, "shared_driver_idle_s", "spark", SparkConfig.shared_driver_idle_s, 0, 7 * 86400
        ),
        shared_drivers=r.integer(spk, "shared_drivers", "spark", SparkConfig.shared_drivers, 1, 16),
    )
    tables, notify = _tables(r, top), _notify(r, top.get("notify"))
    st = r.mapping(top.get("stream") or {}, "stream", _STREAM)
    stream = StreamConfig(
        max_lag_seconds=_duration(r, st, "max_lag_seconds", "stream", StreamConfig.max_lag_seconds),
        log_dir=r.string(st, "log_dir", "stream", ""),
        max_transaction_memory=r.integer(
            st, "max_transaction_memory", "stream", StreamConfig.max_transaction_memory, 2**20, 2**40
        ),
        sink=r.string(st, "sink", "stream", StreamConfig.sink),
    )
    if stream.sink not in STREAM_SINKS:
        raise r.fail(
            "stream.sink",
            f"'{stream.sink}' must be one of: {', '.join(STREAM_SINKS)} (spark: a Structured Streaming query; "
            "direct: a Kafka consumer in one Python process)",
        )
    if stream.max_lag_seconds <= 0:
        raise r.fail("stream.max_lag_seconds", "must be more than 0 (e.g. 5m)")
    ld = r.mapping(top.get("load") or {}, "load", _LOAD)
    load = LoadConfig(abandon_after=_duration(r, ld, "abandon_after", "load", LoadConfig.abandon_after))
    if load.abandon_after <= 0:
        raise r.fail("load.abandon_after", "must be more than 0 (e.g. 15m)")
    rp = r.mapping(top.get("repair") or {}, "repair", _REPAIR)
    # the settlement's table names are resolved when a settlement runs (one line naming a missing one): a copy
    # of this file with other tables stays valid
    return Pipeline(
        name=r.string(top, "name", "", "pipeline"),
        source=mysql,
        kafka=kafka,
        target=target,
        spark=spark,
        tables=tables,
        path=source,
        notify=notify,
        stream=stream,
        load=load,
        repair=RepairConfig(
            max_rows=r.integer(rp, "max_rows", "repair", RepairConfig.max_rows, 1, 10**9),
            after_cutover=_flag(r, rp, "after_cutover", "repair", RepairConfig.after_cutover),
        ),
        settlement=settlement_section.parse(top.get("settlement"), source),
    )


def _source(r: _Reader, raw: Any) -> MySQLSource:
    src = r.mapping(raw, "source", _SOURCE, required=("host", "user"))
    if r.string(src, "type", "source", "mysql") not in ("mysql", "mariadb"):
        raise r.fail("source.type", "must be 'mysql' or 'mariadb'")
    mysql = MySQLSource(
        host=r.required(src, "host", "source"),
        port=r.port(src, "port", "source", 3306),
        user=r.required(src, "user", "source"),
        password=r.secret(src, "password", "source"),
        server_id=r.integer(src, "server_id", "source", 5401, 1, 2**32 - 1, "a server id"),
        snapshot=r.string(src, "snapshot", "source", "auto"),
    )
    if mysql.snapshot not in SNAPSHOT_METHODS:
        raise r.fail(
            "source.snapshot",
            f"'{mysql.snapshot}' is not one of {', '.join(SNAPSHOT_METHODS)} (auto: "
            "mariadb on MariaDB, portable elsewhere)",
        )
    return mysql


def _kafka(r: _Reader, raw: Any) -> KafkaConfig:
    kaf = r.mapping(raw, "kafka", _KAFKA, required=("bootstrap",))
    bootstrap = r.required(kaf, "bootstrap", "kafka")
    for hostport in bootstrap.split(","):
        host, _, port = hostport.strip().rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise r.fail("kafka.bootstrap", f"'{hostport.strip()}' is not host:port")
    prefix = r.string(kaf, "topic_prefix", "kafka", "seam")
    if not re.fullmatch(r"[A-Za-z0-9._-]{1,200}", prefix):
        raise r.fail(
            "kafka.topic_prefix", f"'{prefix}' has characters Kafka topics cannot hold (use letters, digits, . _ -)"
        )
    kafka = KafkaConfig(
        bootstrap=bootstrap,
        topic_prefix=prefix,
        partitions=r.integer(kaf, "partitions", "kafka", 1, 1, 1024),
        max_unapplied_events=r.integer(
            kaf, "max_unapplied_events", "kafka", KafkaConfig.max_unapplied_events, 100, 10**9
        ),
        max_unapplied_bytes=r.integer(
            kaf, "max_unapplied_bytes", "kafka", KafkaConfig.max_unapplied_bytes, 65536, 2**40
        ),
        # at most 256 MiB: librdkafka takes messages up to 1e9 bytes, and a value's record is about twice its size
        max_value_bytes=r.integer(kaf, "max_value_bytes", "kafka", KafkaConfig.max_value_bytes, 2**20, 2**28),
    )
    if kafka.partitions != 1:
        raise r.fail(
            "kafka.partitions",
            "must be 1: one partition per table topic is what keeps BEGIN before and "
            "END after every row of a batch (see seam/boundary.py)",
        )
    return kafka


def _target(r: _Reader, raw: Any) -> PostgresTarget:
    tgt = r.mapping(raw, "target", _TARGET, required=("host", "database", "user"))
    if r.string(tgt, "type", "target", "postgres") != "postgres":
        raise r.fail("target.type", "must be 'postgres' (the only target so far)")
    target = PostgresTarget(
        host=r.required(tgt, "host", "target"),
        port=r.port(tgt, "port", "target", 5432),
        database=r.required(tgt, "database", "target"),
        user=r.required(tgt, "user", "target"),
        password=r.secret(tgt, "password", "target"),
        state_schema=r.string(tgt, "state_schema", "target", "seam"),
        text_nul=r.string(tgt, "text_nul", "target", "replace"),
        zero_dates=r.string(tgt, "zero_dates", "target", "-infinity"),
    )
    if target.text_nul not in NUL_MAPPINGS:
        raise r.fail(
            "target.text_nul",
            f"'{target.text_nul}' must be one of: {', '.join(NUL_MAPPINGS)} (what a NUL character in MySQL text "
            "becomes: PostgreSQL text cannot hold it)",
        )
    if target.zero_dates not in ZERO_DATES:
        raise r.fail(
            "target.zero_dates",
            f"'{target.zero_dates}' must be one of: {', '.join(ZERO_DATES)} (what a zero date such as 0000-00-00 "
            "becomes in a NOT NULL date column: PostgreSQL has no zero date)",
        )
    return target


def _tables(r: _Reader, top: dict) -> tuple[TableConfig, ...]:
    defaults = r.mapping(top.get("defaults") or {}, "defaults", _DEFAULTS)
    default_delay = _duration(r, defaults, "safety_delay", "defaults", 30.0)
    default_semantics = _semantics(r, defaults, "defaults", "exactly-once")
    raw_tables = top["tables"]
    if not isinstance(raw_tables, list) or not raw_tables:
        raise r.fail("tables", "must be a non-empty list of tables")
    tables = []
    seen: set[str] = set()
    for i, raw_table in enumerate(raw_tables):
        path = f"tables[{i}]"
        t = r.mapping(raw_table, path, _TABLE, required=("name",))
        name = r.required(t, "name", path)
        db, dot, table = name.partition(".")
        if not dot or not _IDENT.match(db) or not _IDENT.match(table):
            raise r.fail(f"{path}.name", f"'{name}' must be 'database.table'")
        if name in seen:
            raise r.fail(f"{path}.name", f"'{name}' is listed twice")
        seen.add(name)
        key = _key(r, t.get("key", "none"), f"{path}.key")
        cursor = r.string(t, "cursor", path)
        soft_delete = r.string(t, "soft_delete", path)
        incremental = t.get("incremental", cursor is not None)
        if not isinstance(incremental, bool):
            raise r.fail(f"{path}.incremental", "must be true or false")
        if "sync" in t:  # the mode's name; ``incremental: true`` is its older spelling of ``sync: windows``
            if t["sync"] not in ("stream", "windows"):
                raise r.fail(
                    f"{path}.sync",
                    f"{t['sync']!r} is not a sync mode: use stream (binlog) or windows (safe-window incremental loads)",
                )
            if "incremental" in t and t["incremental"] != (t["sync"] == "windows"):
                raise r.fail(f"{path}.incremental", f"contradicts sync: {t['sync']} (drop incremental)")
            incremental = t["sync"] == "windows"
        if incremental and not cursor:
            raise r.fail(f"{path}.cursor", "is required for a table kept current by windows (e.g. cursor: updated_at)")
        semantics = _semantics(r, t, path, default_semantics)
        if not key and semantics == "at-least-once":
            raise r.fail(
                f"{path}.semantics", "at-least-once needs a key to dedupe on; a keyless table needs exactly-once"
            )
        tables.append(
            TableConfig(
                db=db,
                table=table,
                key=key,
                cursor=cursor,
                safety_delay_s=_duration(r, t, "safety_delay", path, default_delay),
                semantics=semantics,
                soft_delete=soft_delete,
                incremental=incremental,
                checks=_checks(r, t.get("checks") or {}, f"{path}.checks"),
            )
        )
    return tuple(tables)


def _notify(r: _Reader, raw: Any) -> dict[str, Any]:
    notify = dict(r.mapping(raw or {}, "notify", _NOTIFY))
    if notify.get("webhook") is not None:
        notify["webhook"] = r.string(notify, "webhook", "notify")
        if not re.match(r"^https?://", notify["webhook"]):
            raise r.fail("notify.webhook", f"'{notify['webhook']}' is not an http(s) URL")
    if notify.get("email") is not None:
        email = r.mapping(notify["email"], "notify.email", _NOTIFY_EMAIL, required=("to",))
        to = email["to"] if isinstance(email["to"], list) else [email["to"]]
        if not all(isinstance(a, str) and "@" in a for a in to):
            raise r.fail("notify.email.to", "must be an e-mail address or a list of them")
        notify["email"] = {
            "to": to,
            "conn_id": r.string(email, "conn_id", "notify.email", "smtp_default"),
            "subject": r.string(email, "subject", "notify.email", ""),
            "from": r.string(email, "from", "notify.email", "seam@localhost"),
        }
    return notify


def _checks(r: _Reader, raw: Any, path: str) -> dict[str, Any]:
    checks = dict(r.mapping(raw, path, _CHECKS))
    for name in ("count", "checksum"):
        if not isinstance(checks.get(name, True), bool):
            raise r.fail(f"{path}.{name}", "must be true or false")
    columns = checks.get("columns") or {}
    if not isinstance(columns, dict):
        raise r.fail(f"{path}.columns", "must map column names to checks, e.g. {amount: {sum: {}}}")
    parsed: dict[str, dict] = {}
    for column, spec in columns.items():
        where = f"{path}.columns.{column}"
        if isinstance(spec, list):  # [sum, null_count]: shorthand for comparing both sides
            spec = {name: {} for name in spec}
        spec = r.mapping(spec, where, _COLUMN_CHECKS)
        parsed[str(column)] = {}
        for metric, opts in spec.items():
            opts = {} if opts in (None, True) else opts
            opts = r.mapping(opts, f"{where}.{metric}", ("equal_to",))
            if "equal_to" in opts and (
                isinstance(opts["equal_to"], bool) or not isinstance(opts["equal_to"], (int, float, str))
            ):
                raise r.fail(f"{where}.{metric}.equal_to", "must be a number")
            parsed[str(column)][metric] = dict(opts)
    checks["columns"] = parsed
    return checks


def _duration(r: _Reader, raw: dict, key: str, path: str, default: float) -> float:
    value = r.expand(raw.get(key, default), _join(path, key))
    try:
        return parse_duration(value)
    except ValueError:
        raise r.fail(_join(path, key), f"'{value}' is not a duration (e.g. 30s, 1m, 500ms)") from None


def _semantics(r: _Reader, raw: dict, path: str, default: str) -> str:
    value = raw.get("semantics", default)
    if value not in SEMANTICS:
        raise r.fail(_join(path, "semantics"), f"'{value}' must be one of: {', '.join(SEMANTICS)}")
    return value


def _key(r: _Reader, value: Any, path: str) -> tuple[str, ...]:
    if value in (None, "none", []):
        return ()
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(c, str) and c for c in value):
        raise r.fail(path, "must be a column name, a list of column names, or 'none'")
    if len(set(value)) != len(value):
        raise r.fail(path, "lists a column twice")
    return tuple(value)
