"""Real Airflow DAG runs for tests: ``dag.test`` in a child process against the embedded stack's Airflow
metadata database (the DAG file as the scheduler would parse it), and a webhook that records the alerts."""

from __future__ import annotations

import json
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.support.commands import run_command

RUN_DAG = """
import json, sys
from airflow.dag_processing.dagbag import DagBag
from airflow.models.asset import AssetEvent
from airflow.models.dag import DagModel
from airflow.utils.session import create_session
bag = DagBag(dag_folder=sys.argv[1])
dag = bag.get_dag(sys.argv[3])
# A test that triggered this DAG through the scheduler left it unpaused; the standalone scheduler would then
# drive dag.test's run too (deadlocks on dag_run, tasks run twice). Paused, the scheduler leaves it alone.
with create_session() as session:
    session.query(DagModel).filter(DagModel.dag_id == dag.dag_id).update({"is_paused": True})
run = dag.test(run_conf=json.loads(sys.argv[2]))
states = {(f"{ti.task_id}[{ti.map_index}]" if ti.map_index >= 0 else ti.task_id): str(ti.state)
          for ti in run.get_task_instances()}
with create_session() as session:
    events = [(e.asset.uri, e.extra.get("day")) for e in session.query(AssetEvent).filter(
        AssetEvent.source_run_id == run.run_id)]
print("RESULT " + json.dumps({"state": str(run.state), "tasks": states, "assets": sorted(events)}))
"""


def run_dag(stack, dag_id: str, conf: dict, env: dict[str, str] | None = None, timeout: float = 900) -> dict:
    """One run of ``dag_id`` with ``conf`` as its Params (``env``: e.g. an ``AIRFLOW_CONN_*`` to change a
    connection); returns its state, task states, the Asset events it emitted and its whole log."""
    full_env = {**os.environ, **stack.airflow_env(), **(env or {})}
    dag_file = os.path.join(full_env["AIRFLOW__CORE__DAGS_FOLDER"], f"{dag_id}.py")  # each DAG has its own file
    out = run_command(
        [sys.executable, "-c", RUN_DAG, dag_file, json.dumps(conf), dag_id],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=full_env,
    )
    lines = [line for line in out.stdout.splitlines() if line.startswith("RESULT ")]
    assert lines, out.stdout[-3000:] + out.stderr[-5000:]
    return {**json.loads(lines[-1][len("RESULT ") :]), "log": out.stdout + out.stderr}


@pytest.fixture()
def webhook():
    """A local webhook notifier: its URL, and the JSON bodies posted to it."""
    posts = []

    class Hook(BaseHTTPRequestHandler):
        def do_POST(self):
            posts.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args):
            pass

    http = ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=http.serve_forever, daemon=True).start()
    yield {"url": f"http://127.0.0.1:{http.server_address[1]}/alerts", "posts": posts}
    http.shutdown()
