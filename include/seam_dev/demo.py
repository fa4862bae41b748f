"""Demo data: a small settlement-style schema in MySQL/MariaDB, a seeder, and
a writer that runs a concurrent insert/update/delete mix against it.

Its size: the demo schema, its seeder and its writer change together (a new column is all three).

The schema covers what breaks sync tools: a ledger with DATETIME(6)
``updated_at`` and an unsigned auto-increment id, a table with no primary key
(and duplicate rows), and a table of awkward types (DECIMAL(20,6), unsigned
BIGINT at its maximum, DATETIME(6), TIMESTAMP, DATE, TIME, JSON, ENUM, SET,
BIT, TINYINT(1), YEAR, BLOB, utf8mb4 text with emoji).

Delivery guarantee: none (test data). Seeding is repeatable for a given row
count: a fixed random seed makes the same data every time.
"""

from __future__ import annotations

import datetime as dt
import json
import random
import threading
import time
from decimal import Decimal

import pymysql

DATABASE = "demo"

SCHEMA = [
    """CREATE TABLE `accounts` (
      `id` BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
      `owner` VARCHAR(100) NOT NULL,
      `currency` CHAR(3) NOT NULL,
      `balance` DECIMAL(20,6) NOT NULL DEFAULT 0,
      `status` ENUM('open','frozen','closed') NOT NULL DEFAULT 'open',
      `created_at` DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
      `updated_at` DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6),
      KEY `ix_accounts_updated` (`updated_at`, `id`)
    ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4""",
    """CREATE TABLE `payments` (
      `id` BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
      `account_id` BIGINT NOT NULL,
      `amount` DECIMAL(20,6) NOT NULL,
      `currency` CHAR(3) NOT NULL,
      `status` ENUM('pending','settled','failed','reversed') NOT NULL,
      `reference` VARCHAR(64) NOT NULL,
      `memo` VARCHAR(255) NULL,
      `value_date` DATE NOT NULL,
      `is_deleted` TINYINT(1) NOT NULL DEFAULT 0,
      `created_at` DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
      `updated_at` DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6),
      KEY `ix_payments_updated` (`updated_at`, `id`),
      KEY `ix_payments_account` (`account_id`)
    ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4""",
    # No primary key and no unique index, on purpose: identical rows happen.
    """CREATE TABLE `audit_log` (
      `logged_at` DATETIME(6) NOT NULL,
      `account_id` BIGINT NULL,
      `action` VARCHAR(32) NOT NULL,
      `detail` VARCHAR(255) NULL
    ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4""",
    """CREATE TABLE `type_zoo` (
      `id` INT NOT NULL PRIMARY KEY,
      `amount` DECIMAL(20,6) NULL,
      `big_unsigned` BIGINT UNSIGNED NULL,
      `happened_at` DATETIME(6) NULL,
      `stamped_at` TIMESTAMP(6) NULL DEFAULT NULL,
      `day` DATE NULL,
      `clock` TIME(6) NULL,
      `doc` JSON NULL,
      `mood` ENUM('happy','sad','meh') NULL,
      `tags` SET('red','green','blue') NULL,
      `flags` BIT(12) NULL,
      `active` TINYINT(1) NULL,
      `vintage` YEAR NULL,
      `payload` BLOB NULL,
      `note` VARCHAR(200) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
      `updated_at` DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6)
    ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4""",
]

CURRENCIES = ("EUR", "USD", "GBP", "CHF", "JPY")
OWNERS = ("Ada", "Bob", "Chloé", "Dmitri", "Eun-ji", "Farah", "Gøran", "Hiro", "Inés", "José")
NOTES = (
    "plain",
    "émigré café",
    "日本語テキスト",
    "emoji 💸🏦✅",
    "quote ' and \" and \\ backslash",
    "tab\tand newline\n",
    "",
    "🧾 settlement T+2",
)
EPOCH = dt.datetime(2026, 1, 1)


def connect(admin_url: str, database: str | None = None, autocommit: bool = True) -> pymysql.Connection:
    """Connect from a SQLAlchemy-style URL (``mysql+pymysql://user:pw@host:port/``)."""
    from sqlalchemy.engine import make_url

    url = make_url(admin_url)
    return pymysql.connect(
        host=url.host or "127.0.0.1",
        port=url.port or 3306,
        user=url.username,
        password=url.password or "",
        database=database or url.database or None,
        charset="utf8mb4",
        autocommit=autocommit,
    )


def seed(
    pipeline, rows: int, admin_url: str | None, reset: bool = True, database: str = DATABASE, log=print
) -> dict[str, int]:
    """Create the demo schema (dropping it first unless ``reset`` is False) and fill it."""
    if not admin_url:
        raise RuntimeError(
            "SEAM_MYSQL_URL is not set: seeding needs an admin connection "
            "(run `seam up`, or export SEAM_MYSQL_URL=mysql+pymysql://user:pass@host:port/)"
        )
    rng = random.Random(42 if reset else time.time_ns())
    conn = connect(admin_url)
    with conn.cursor() as cur:
        if reset:
            cur.execute(f"DROP DATABASE IF EXISTS `{database}`")
        cur.execute(f"CREATE DATABASE IF NOT EXISTS `{database}` CHARACTER SET utf8mb4")
        cur.execute(f"USE `{database}`")
        if reset:
            for ddl in SCHEMA:
                cur.execute(ddl)
    n_accounts = max(10, rows // 20)
    counts = {
        "accounts": _insert(conn, "accounts", _accounts(rng, n_accounts), log),
        "payments": _insert(conn, "payments", _payments(rng, rows, n_accounts), log),
        "audit_log": _insert(conn, "audit_log", _audit(rng, rows // 4, n_accounts), log),
        "type_zoo": _insert(
            conn, "type_zoo", _zoo(rng, min(max(rows // 100, 50), 5000), _max_id(conn, "type_zoo")), log
        ),
    }
    conn.close()
    log(f"seeded {database}: " + ", ".join(f"{t}={n}" for t, n in counts.items()))
    return counts


def _max_id(conn, table: str) -> int:
    with conn.cursor() as cur:
        cur.execute(f"SELECT COALESCE(MAX(`id`), 0) FROM `{table}`")
        return int(cur.fetchone()[0])


def _insert(conn, table: str, rows, log, batch: int = 5000) -> int:
    total = 0
    started = time.monotonic()
    chunk: list[dict] = []
    for row in rows:
        chunk.append(row)
        if len(chunk) >= batch:
            total += _flush(conn, table, chunk)
            chunk = []
            if total % 100_000 == 0:
                log(f"  {table}: {total:,} rows ({total / (time.monotonic() - started):,.0f} rows/s)")
    if chunk:
        total += _flush(conn, table, chunk)
    return total


def _flush(conn, table: str, rows: list[dict]) -> int:
    cols = list(rows[0])
    sql = f"INSERT INTO `{table}` ({', '.join(f'`{c}`' for c in cols)}) VALUES ({', '.join(['%s'] * len(cols))})"
    with conn.cursor() as cur:
        cur.executemany(sql, [tuple(r[c] for c in cols) for r in rows])
    conn.commit()
    return len(rows)


def _ts(rng: random.Random, days: int = 300) -> dt.datetime:
    return EPOCH + dt.timedelta(microseconds=rng.randrange(days * 86_400 * 10**6))


def _accounts(rng, n):
    for _ in range(n):
        created = _ts(rng)
        yield {
            "owner": rng.choice(OWNERS),
            "currency": rng.choice(CURRENCIES),
            "balance": Decimal(rng.randrange(-(10**9), 10**11)) / 10**6,
            "status": rng.choice(("open", "open", "open", "frozen", "closed")),
            "created_at": created,
            "updated_at": created,
        }


def _payment(rng, n_accounts, when: dt.datetime | None = None):
    created = when or _ts(rng)
    return {
        "account_id": rng.randrange(1, n_accounts + 1),
        "amount": Decimal(rng.randrange(1, 10**12)) / 10**6 * rng.choice((1, 1, 1, -1)),
        "currency": rng.choice(CURRENCIES),
        "status": rng.choice(("pending", "settled", "settled", "failed")),
        "reference": f"PAY-{rng.getrandbits(48):012X}",
        "memo": rng.choice(NOTES + (None,)),
        "value_date": created.date() + dt.timedelta(days=rng.choice((0, 1, 2))),
        "created_at": created,
        "updated_at": created,
    }


def _payments(rng, n, n_accounts):
    for _ in range(n):
        yield _payment(rng, n_accounts)


def _audit(rng, n, n_accounts):
    previous = None
    for _ in range(n):
        if previous and rng.random() < 0.05:
            yield dict(previous)  # an exact duplicate row: keyless tables must keep both
            continue
        previous = {
            "logged_at": _ts(rng).replace(microsecond=0),
            "account_id": rng.choice((None, rng.randrange(1, n_accounts + 1))),
            "action": rng.choice(("login", "transfer", "freeze", "export")),
            "detail": rng.choice(NOTES + (None,)),
        }
        yield previous


def _zoo_row(rng, i: int) -> dict:
    edge = i % 10
    return {
        "id": i,
        "amount": (
            None
            if edge == 3
            else Decimal("99999999999999.999999")
            if edge == 1
            else Decimal("-0.000001")
            if edge == 2
            else Decimal(rng.randrange(-(10**13), 10**13)) / 10**6
        ),
        "big_unsigned": (
            18446744073709551615 if edge == 1 else 0 if edge == 2 else None if edge == 3 else rng.getrandbits(64)
        ),
        "happened_at": None
        if edge == 3
        else _ts(rng, 20000)
        if edge != 1
        else dt.datetime(9999, 12, 31, 23, 59, 59, 999999),
        "stamped_at": None if edge == 3 else dt.datetime(1970, 1, 1, 0, 0, 1) if edge == 2 else _ts(rng),
        "day": None if edge == 3 else dt.date(1000, 1, 1) if edge == 2 else _ts(rng).date(),
        "clock": None
        if edge == 3
        else "-838:59:59.000000"
        if edge == 1  # PyMySQL mis-renders negative timedelta
        else dt.timedelta(microseconds=rng.randrange(86_400 * 10**6)),
        "doc": None
        if edge == 3
        else json.dumps(
            {"i": i, "tags": ["a", "ü"], "nested": {"x": rng.random() < 0.5, "n": None}}, ensure_ascii=False
        ),
        "mood": None if edge == 3 else rng.choice(("happy", "sad", "meh")),
        "tags": None
        if edge == 3
        else ""
        if edge == 2
        else ",".join(sorted(rng.sample(("red", "green", "blue"), rng.randint(1, 3)))),
        "flags": None if edge == 3 else rng.getrandbits(12).to_bytes(2, "big") if edge != 1 else b"\x0f\xff",
        "active": None if edge == 3 else rng.choice((0, 1)),
        "vintage": None if edge == 3 else 1901 if edge == 1 else rng.randint(1970, 2155),
        "payload": None
        if edge == 3
        else b""
        if edge == 2
        else bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 64))),
        "note": None if edge == 3 else rng.choice(NOTES),
    }


def _zoo(rng, n, start: int):
    for i in range(start + 1, start + n + 1):
        yield _zoo_row(rng, i)


# ---------------------------------------------------------------- writer ----


class _Writer(threading.Thread):
    """One connection running small transactions at its share of the rate."""

    def __init__(self, admin_url, database, rate, seconds, seed, bounds, lock, stats, until):
        super().__init__(daemon=True)
        self.until = until
        self.conn = connect(admin_url, database, autocommit=False)
        self.rng = random.Random(seed)
        self.interval = 1.0 / rate if rate > 0 else 0.0
        self.seconds = seconds
        self.bounds = bounds
        self.lock = lock
        self.stats = stats
        self.error: BaseException | None = None

    def run(self):
        try:
            self._loop()
        except BaseException as exc:  # noqa: BLE001 - surfaced by run_writer
            self.error = exc
        finally:
            self.conn.close()

    def _loop(self):
        deadline = time.monotonic() + self.seconds
        next_at = time.monotonic()
        while time.monotonic() < deadline and not (self.until and self.until.is_set()):
            ops = self.rng.choice((1, 1, 2, 3))
            try:
                with self.conn.cursor() as cur:
                    done = [self._one(cur) for _ in range(ops)]
                self.conn.commit()
            except pymysql.err.OperationalError as exc:
                self.conn.rollback()
                if exc.args[0] in (1213, 1205):  # deadlock / lock wait: the mix is concurrent on purpose
                    self._count("retried")
                    continue
                raise
            for op in done:
                self._count(op)
            self._count("transactions")
            next_at += self.interval * ops
            pause = next_at - time.monotonic()
            if pause > 0:
                time.sleep(pause)

    def _count(self, what):
        with self.lock:
            self.stats[what] = self.stats.get(what, 0) + 1

    def _random_id(self, table):
        lo, hi = self.bounds[table]
        return self.rng.randint(lo, max(lo, hi))

    def _one(self, cur) -> str:
        r = self.rng.random()
        now = dt.datetime.now(dt.UTC).replace(tzinfo=None)
        if r < 0.35:
            row = _payment(self.rng, self.bounds["accounts"][1], when=now)
            del row["created_at"], row["updated_at"]
            cur.execute(
                "INSERT INTO `payments` (`account_id`, `amount`, `currency`, `status`, `reference`, "
                "`memo`, `value_date`) VALUES (%s,%s,%s,%s,%s,%s,%s)",
                tuple(row.values()),
            )
            with self.lock:
                lo, hi = self.bounds["payments"]
                self.bounds["payments"] = (lo, max(hi, cur.lastrowid))
            return "insert payments"
        if r < 0.60:
            cur.execute(
                "UPDATE `payments` SET `status` = %s, `amount` = `amount` + 0.000001 WHERE `id` = %s",
                (self.rng.choice(("settled", "failed", "reversed")), self._random_id("payments")),
            )
            return "update payments"
        if r < 0.65:
            cur.execute("DELETE FROM `payments` WHERE `id` = %s", (self._random_id("payments"),))
            return "delete payments"
        if r < 0.68:
            cur.execute("UPDATE `payments` SET `is_deleted` = 1 WHERE `id` = %s", (self._random_id("payments"),))
            return "soft-delete payments"
        if r < 0.78:
            cur.execute(
                "UPDATE `accounts` SET `balance` = `balance` + %s WHERE `id` = %s",
                (Decimal(self.rng.randrange(-(10**8), 10**8)) / 10**6, self._random_id("accounts")),
            )
            return "update accounts"
        if r < 0.88:
            row = next(_audit(self.rng, 1, self.bounds["accounts"][1]))
            row["logged_at"] = now
            cur.execute("INSERT INTO `audit_log` VALUES (%s,%s,%s,%s)", tuple(row.values()))
            return "insert audit_log"
        if r < 0.91:
            cur.execute("DELETE FROM `audit_log` WHERE `account_id` = %s LIMIT 1", (self._random_id("accounts"),))
            return "delete audit_log"
        if r < 0.97:
            cur.execute(
                "UPDATE `type_zoo` SET `note` = %s, `amount` = %s, `tags` = %s WHERE `id` = %s",
                (
                    self.rng.choice(NOTES),
                    Decimal(self.rng.randrange(-(10**9), 10**9)) / 10**6,
                    self.rng.choice(("red", "green,blue", "")),
                    self._random_id("type_zoo"),
                ),
            )
            return "update type_zoo"
        with self.lock:
            lo, hi = self.bounds["type_zoo"]
            new_id = hi + 1
            self.bounds["type_zoo"] = (lo, new_id)
        row = _zoo_row(self.rng, new_id)
        cols = ", ".join(f"`{c}`" for c in row)
        cur.execute(f"INSERT INTO `type_zoo` ({cols}) VALUES ({', '.join(['%s'] * len(row))})", tuple(row.values()))
        return "insert type_zoo"


def run_writer(
    admin_url: str,
    rate: float,
    seconds: float,
    threads: int = 2,
    seed: int | None = None,
    database: str = DATABASE,
    until: threading.Event | None = None,
) -> dict[str, float]:
    """Run ``threads`` concurrent writers for ``seconds`` (or until ``until`` is set) at about ``rate``
    changes/s in total."""
    if not admin_url:
        raise RuntimeError("SEAM_MYSQL_URL is not set (run `seam up`)")
    conn = connect(admin_url, database)
    bounds = {}
    with conn.cursor() as cur:
        for table in ("accounts", "payments", "type_zoo"):
            cur.execute(f"SELECT COALESCE(MIN(`id`), 1), COALESCE(MAX(`id`), 1) FROM `{table}`")
            lo, hi = cur.fetchone()
            bounds[table] = (int(lo), int(hi))
    conn.close()
    lock = threading.Lock()
    stats: dict[str, float] = {}
    base_seed = seed if seed is not None else time.time_ns()
    workers = [
        _Writer(admin_url, database, rate / threads, seconds, base_seed + i, bounds, lock, stats, until)
        for i in range(threads)
    ]
    started = time.monotonic()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    errors = [w.error for w in workers if w.error]
    if errors:
        raise errors[0]
    stats["seconds"] = round(time.monotonic() - started, 2)
    return stats
