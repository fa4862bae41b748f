"""The embedded stack's settings: its ports and credentials, fixed at the first ``seam up`` in a file of the state
dir only its owner reads, and the environment that names them (``seam env``). Apart from ``seam_dev.stack``,
which starts and stops the services: every ``seam`` command reads these, and only the commands that start or
stop the services import their code (HTTP clients, Spark's helpers).

Delivery guarantee: none (configuration)."""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path

from seam.config import state_dir
from seam.core.errors import SeamError

DEFAULT_PORTS = {"mysql": 33306, "kafka": 39092, "postgres": 35432, "airflow": 38080}
PORT_ENV = {
    "mysql": "SEAM_MYSQL_PORT",
    "kafka": "SEAM_KAFKA_PORT",
    "postgres": "SEAM_TARGET_PORT",
    "airflow": "SEAM_AIRFLOW_PORT",
}
SERVICES = ("mysql", "kafka", "postgres", "airflow")
HOST = "127.0.0.1"
SOURCE_USER = "seam"  # least-privilege replication user
TARGET_DB = "warehouse"
TARGET_ADMIN = "seam"
AIRFLOW_USER = "admin"


class StackError(SeamError):
    """A service could not be started or reached; the message says why and what to do."""

    kind = "stack"


def stack_settings(state: Path, create: bool = False) -> dict:
    """Ports and credentials of the stack in ``state``, fixed at the first ``up`` (file mode 0600)."""
    path = state / "stack.json"
    if path.exists():
        return json.loads(path.read_text())
    if not create:
        raise StackError(f"no embedded stack in {state}: run `seam up` first")
    ports = {}
    for name, default in DEFAULT_PORTS.items():
        raw = os.environ.get(PORT_ENV[name], str(default))
        if not raw.isdigit() or not 0 < int(raw) < 65536:
            raise StackError(f"{PORT_ENV[name]}={raw!r} is not a port (1-65535)")
        ports[name] = int(raw)
    settings = {
        "ports": ports,
        "mysql_root_password": secrets.token_urlsafe(18),
        "mysql_seam_password": secrets.token_urlsafe(18),
        "pg_admin_password": secrets.token_urlsafe(18),
        "pg_airflow_password": secrets.token_urlsafe(18),
        "airflow_admin_password": secrets.token_urlsafe(12),
    }
    state.mkdir(parents=True, exist_ok=True)
    path.touch(mode=0o600)
    path.write_text(json.dumps(settings, indent=2))
    return settings


def settings_env(state: Path) -> dict[str, str]:
    """Every endpoint and credential of the stack in ``state``, as ``seam env`` exports them."""
    s = stack_settings(state)
    p = s["ports"]
    root_pw, seam_pw, pg_pw = s["mysql_root_password"], s["mysql_seam_password"], s["pg_admin_password"]
    return {
        "SEAM_STATE_DIR": str(state),
        "SEAM_MYSQL_HOST": HOST,
        "SEAM_MYSQL_PORT": str(p["mysql"]),
        "SEAM_MYSQL_URL": f"mysql+pymysql://root:{root_pw}@{HOST}:{p['mysql']}/",
        "SEAM_MYSQL_ROOT_PASSWORD": root_pw,
        "SEAM_MYSQL_USER": SOURCE_USER,
        "SEAM_MYSQL_PASSWORD": seam_pw,
        "SEAM_KAFKA_BOOTSTRAP": f"{HOST}:{p['kafka']}",
        "SEAM_TARGET_HOST": HOST,
        "SEAM_TARGET_PORT": str(p["postgres"]),
        "SEAM_TARGET_DB": TARGET_DB,
        "SEAM_TARGET_USER": TARGET_ADMIN,
        "SEAM_TARGET_PASSWORD": pg_pw,
        "SEAM_TARGET_URL": f"postgresql+psycopg://{TARGET_ADMIN}:{pg_pw}@{HOST}:{p['postgres']}/{TARGET_DB}",
        # libpq's form, for psql and other PostgreSQL clients (SEAM_TARGET_URL is SQLAlchemy's)
        "SEAM_TARGET_PSQL_URL": f"postgresql://{TARGET_ADMIN}:{pg_pw}@{HOST}:{p['postgres']}/{TARGET_DB}",
        "SEAM_AIRFLOW_URL": f"http://{HOST}:{p['airflow']}",
        "SEAM_AIRFLOW_USER": AIRFLOW_USER,
        "SEAM_AIRFLOW_PASSWORD": s["airflow_admin_password"],
        "SEAM_AIRFLOW_HOME": str(state / "airflow"),
        "SEAM_SPARK_MASTER": os.environ.get("SEAM_SPARK_MASTER", "local[2]"),
    }


def stack_env(state: Path | None = None) -> dict[str, str]:
    """``settings_env`` of the stack in ``state`` (by default this process's state dir); {} when no stack was
    set up there."""
    from_state = state if state is not None else state_dir()
    try:
        return settings_env(from_state)
    except StackError:
        return {}


def use_stack_env(state: Path | None = None) -> dict[str, str]:
    """Put ``stack_env`` into this process's environment where a variable is not set already, so that a
    pipeline's ``${SEAM_...}`` references resolve with no export; returns it."""
    env = stack_env(state)
    for key, value in env.items():
        os.environ.setdefault(key, value)
    return env
