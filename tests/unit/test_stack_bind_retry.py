"""Airflow's API server failing to bind its port (a passing connection holds it, or its TIME_WAIT) is seen in
the log of the start at hand, and said so that ``EmbeddedStack._start`` starts Airflow again: ``airflow
standalone`` runs on without that server, and its start was waited out to its timeout (CI: every Airflow test
failed at its setup). Live, with a port held 20 s by an established connection: three starts, up in 84 s."""

from __future__ import annotations

import os
import socket

import psutil
import pytest

from seam_dev import stack
from seam_dev.settings import StackError

# as uvicorn wrote it in CI's log (airflow standalone prefixes each line with its component)
FAILED = (
    "api-server | 2026-12-07T15:01:08.888247Z [error    ] [Errno 98] error while attempting to bind on address "
    "('127.0.0.1', 48080): address already in use [uvicorn.error] loc=server.py:190\n"
)
STARTED = "api-server | 2026-12-07T15:01:08.886697Z [info     ] Application startup complete. [uvicorn.error]\n"


def test_a_failed_bind_of_this_start_is_a_bind_failure_an_earlier_starts_is_not(tmp_path):
    log = tmp_path / "airflow.log"
    log.write_text(FAILED + "dag-processor | DAG File Processing Stats\n")
    since = log.stat().st_size
    with open(log, "a") as out:
        out.write(STARTED)
    bound = stack._APIServerBind(log, since)
    assert bound()  # the failure was an earlier start's
    with open(log, "a") as out:
        out.write(FAILED)
    with pytest.raises(StackError) as failed:
        bound()
    said = str(failed.value)
    assert said.startswith("Airflow's API server could not start: [Errno 98]") and "48080" in said
    assert any(marker in said.lower() for marker in stack.BIND_FAILED)  # what _start starts again on


def test_the_retry_names_who_holds_the_port():
    """The line a retry logs names the holder (a session's start took 110 s behind a port held at three
    starts in a row, by a holder no one could name afterwards)."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port)) as client:
            accepted, _ = server.accept()
            with accepted:
                client_port = client.getsockname()[1]
                held = stack.port_holders(client_port)
                assert held == f"held by pid {os.getpid()} ({psutil.Process().name()}) ESTABLISHED to 127.0.0.1:{port}"
    # the side that closed first keeps the port in TIME_WAIT, with no process
    assert stack.port_holders(port) == f"held by a closed socket TIME_WAIT to 127.0.0.1:{client_port}"
