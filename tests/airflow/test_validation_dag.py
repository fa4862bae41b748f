"""A failing validation inside a real Airflow DAG run (``dag.test`` against the embedded stack's Airflow
metadata database): the task fails with the summary in its log, and the test's own SMTP server and webhook
receiver each get exactly one alert naming the table and the mismatch. An equal table passes."""

from __future__ import annotations

import email
import json
import os
import socket
import sys
import threading
import urllib.error
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import psycopg
import pytest

from seam.config import load_pipeline
from seam_dev import demo
from seam_dev.airflow_api import AirflowClient
from tests.support.commands import run_command
from tests.support.pipelines import pipeline_file

DB = "valdag_test"
pytestmark = [pytest.mark.airflow, pytest.mark.slow]

RUN_DAG = """
import json, sys
from airflow.dag_processing.dagbag import DagBag
bag = DagBag(dag_folder=sys.argv[1])
dag = bag.get_dag("seam_validate")
run = dag.test(run_conf=json.loads(sys.argv[2]))
states = {f"{ti.task_id}[{ti.map_index}]": str(ti.state) for ti in run.get_task_instances()}
print("RESULT " + json.dumps({"state": str(run.state), "run_id": run.run_id, "tasks": states}))
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture()
def receivers():
    """A local SMTP server (aiosmtpd) and an HTTP webhook receiver, collecting what they are sent."""
    from aiosmtpd.controller import Controller

    mails, posts = [], []

    class Mailbox:
        async def handle_DATA(self, server, session, envelope):
            mails.append((envelope.rcpt_tos, email.message_from_bytes(envelope.content)))
            return "250 OK"

    class Hook(BaseHTTPRequestHandler):
        def do_POST(self):
            posts.append((self.path, json.loads(self.rfile.read(int(self.headers["Content-Length"])))))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args):
            pass

    smtp = Controller(Mailbox(), hostname="127.0.0.1", port=_free_port())
    smtp.start()
    http = ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=http.serve_forever, daemon=True).start()
    yield {
        "smtp_port": smtp.port,
        "webhook": f"http://127.0.0.1:{http.server_address[1]}/seam-alerts",
        "mails": mails,
        "posts": posts,
    }
    http.shutdown()
    smtp.stop()


@pytest.fixture(scope="module")
def loaded(airflow_stack, tmp_path_factory):
    conn = demo.connect(os.environ["SEAM_MYSQL_URL"])
    with conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS `{DB}`")
        cur.execute(f"CREATE DATABASE `{DB}`")
        for table in ("settlements", "fees"):
            cur.execute(
                f"CREATE TABLE `{DB}`.`{table}` (id INT PRIMARY KEY, amount DECIMAL(18,2) NOT NULL, note VARCHAR(20))"
            )
            cur.executemany(
                f"INSERT INTO `{DB}`.`{table}` VALUES (%s, %s, %s)",
                [(i, f"{i * 10}.25", f"n{i}") for i in range(1, 501)],
            )
    conn.close()
    tables = [
        {"name": f"{DB}.settlements", "key": ["id"], "checks": {"columns": {"amount": {"sum": {}}}}},
        {"name": f"{DB}.fees", "key": ["id"]},
    ]
    path = pipeline_file(tmp_path_factory, "valdag", tables)
    out = run_command(
        [sys.executable, "-m", "seam.cli", "--pipeline", path, "load", "full", f"{DB}.settlements", f"{DB}.fees"],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert out.returncode == 0, out.stderr + out.stdout
    return tables


def _run_validate_dag(stack, receivers, path: str, tables: list[str], **conf) -> dict:
    smtp = {
        "conn_type": "smtp",
        "host": "127.0.0.1",
        "port": receivers["smtp_port"],
        "login": "",
        "password": "",
        "extra": {"disable_tls": True, "disable_ssl": True, "from_email": "seam@example.com", "timeout": 10},
    }
    env = {**os.environ, **stack.airflow_env(), "AIRFLOW_CONN_SEAM_TEST_SMTP": json.dumps(smtp)}
    dags = str(stack.airflow_env()["AIRFLOW__CORE__DAGS_FOLDER"])
    out = run_command(
        [sys.executable, "-c", RUN_DAG, dags, json.dumps({"tables": tables, "pipeline": path, **conf})],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    lines = [line for line in out.stdout.splitlines() if line.startswith("RESULT ")]
    assert lines, out.stdout[-3000:] + out.stderr[-5000:]
    return {**json.loads(lines[-1][len("RESULT ") :]), "log": out.stdout + out.stderr}


def test_a_mismatch_fails_the_task_and_alerts_once_by_mail_and_webhook(
    airflow_stack, loaded, receivers, tmp_path_factory
):
    path = pipeline_file(
        tmp_path_factory,
        "valdag_notify",
        loaded,
        notify={
            "webhook": receivers["webhook"],
            "email": {"to": ["settlement-ops@example.com"], "conn_id": "seam_test_smtp"},
        },
    )
    pipeline = load_pipeline(path)
    with psycopg.connect(**pipeline.target.conninfo(), autocommit=True) as conn:
        conn.execute(f'UPDATE "{DB}".settlements SET amount = amount + 1 WHERE id = 42')

    result = _run_validate_dag(airflow_stack, receivers, path, [f"{DB}.settlements", f"{DB}.fees"])
    assert result["state"] == "failed", result["tasks"]
    assert result["tasks"]["tables[-1]"] == "success"
    assert result["tasks"]["validate[0]"] == "failed"  # settlements: the changed row
    assert result["tasks"]["validate[1]"] == "success"  # fees: equal
    assert f"{DB}.settlements: MISMATCH" in result["log"] and "different  id=42: amount:" in result["log"]

    assert len(receivers["posts"]) == 1, receivers["posts"]
    hook_path, body = receivers["posts"][0]
    assert hook_path == "/seam-alerts"
    assert body["table"] == f"{DB}.settlements" and body["problem"] == "validation mismatch"
    assert body["different"] == 1 and body["keys"] == [{"id": "42"}] and "MISMATCH" in body["detail"]
    assert body["dag_id"] == "seam_validate" and body["task_id"] == "validate"

    assert len(receivers["mails"]) == 1, receivers["mails"]
    recipients, message = receivers["mails"][0]
    assert recipients == ["settlement-ops@example.com"]
    assert f"{DB}.settlements" in message["Subject"] and "MISMATCH" in message["Subject"]
    html = next(part for part in message.walk() if part.get_content_type() == "text/html")
    assert "different" in html.get_payload(decode=True).decode() and "42" in html.get_payload(decode=True).decode()

    _the_report_is_one_click_from_the_task(airflow_stack, result["run_id"])


def _get(url: str, token: str | None) -> tuple[int, str]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=30) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(errors="replace")


def _the_report_is_one_click_from_the_task(stack, run_id: str) -> None:
    """The failed task's "Validation report" link (an operator extra link) is served by the API server's
    plugin to a signed-in user only, and is the report of the table that differs."""
    env = stack.airflow_env()
    client = AirflowClient(env["SEAM_AIRFLOW_URL"], env["SEAM_AIRFLOW_USER"], env["SEAM_AIRFLOW_PASSWORD"])
    links = client._request(
        "GET",
        f"/api/v2/dags/seam_validate/dagRuns/{urllib.parse.quote(run_id)}/taskInstances/validate/links?map_index=0",
    )
    url = links["extra_links"]["Validation report"]
    assert url.startswith(env["SEAM_AIRFLOW_URL"] + "/seam-reports/seam_validate/validate-"), links
    status, page = _get(url, client.token())
    assert status == 200 and f"{DB}.settlements" in page and "different" in page, (status, page[:500])
    assert _get(url, None)[0] in (401, 403)  # reports hold rows: Airflow's sign-in guards them
    status, _ = _get(url.rsplit("/", 1)[0] + "/..%2F..%2Fairflow.cfg", client.token())
    assert status == 404


def test_with_repair_on_a_mismatch_is_repaired_validated_again_and_reported(
    airflow_stack, loaded, receivers, tmp_path_factory
):
    """The `repair` Param: the differing rows are copied again (seam repair), the table validates EQUAL, the
    task succeeds, and the webhook says what was repaired; a keyless or too-different table still fails."""
    path = pipeline_file(tmp_path_factory, "valdag_repair", loaded, notify={"webhook": receivers["webhook"]})
    pipeline = load_pipeline(path)
    with psycopg.connect(**pipeline.target.conninfo(), autocommit=True) as conn:
        conn.execute(f"UPDATE \"{DB}\".fees SET note = 'tampered' WHERE id IN (7, 8)")
        conn.execute(f'DELETE FROM "{DB}".fees WHERE id = 9')

    result = _run_validate_dag(airflow_stack, receivers, path, [f"{DB}.fees"], repair=True)
    assert result["state"] == "success", result["tasks"]
    assert f"{DB}.fees: repaired at" in result["log"] and "3 differing row(s)" in result["log"], result["log"][-3000:]
    assert f"{DB}.fees: EQUAL" in result["log"]
    (body,) = [b for _, b in receivers["posts"]]
    assert body["problem"] == "repaired" and body["repair"]["differing"] == 3, body
