"""A small client for Airflow 3's REST API (/api/v2), used by `seam trigger`,
the demo and the tests to drive the real Airflow like a user would.

Delivery guarantee: none (control plane).
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable

TERMINAL = {"success", "failed"}


class AirflowClient:
    def __init__(self, base_url: str, user: str, password: str):
        self.base_url = base_url.rstrip("/")
        self.user = user
        self.password = password
        self._token: str | None = None

    @classmethod
    def from_env(cls) -> AirflowClient:
        try:
            return cls(
                os.environ["SEAM_AIRFLOW_URL"], os.environ["SEAM_AIRFLOW_USER"], os.environ["SEAM_AIRFLOW_PASSWORD"]
            )
        except KeyError as exc:
            raise RuntimeError(f"{exc.args[0]} is not set: run `seam up` or export the Airflow endpoint") from None

    def _request(self, method: str, path: str, body: dict | None = None, auth: bool = True) -> dict:
        headers = {"Content-Type": "application/json"}
        if auth:
            headers["Authorization"] = f"Bearer {self.token()}"
        req = urllib.request.Request(
            self.base_url + path,
            method=method,
            headers=headers,
            data=json.dumps(body).encode() if body is not None else None,
        )
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                return json.load(resp)
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode(errors="replace")[:500]
            raise RuntimeError(f"Airflow {method} {path}: HTTP {exc.code}: {detail}") from None
        except urllib.error.URLError as exc:
            raise RuntimeError(f"Airflow at {self.base_url} is not reachable ({exc.reason}): `seam up`?") from None

    def token(self) -> str:
        if self._token is None:
            self._token = self._request(
                "POST", "/auth/token", {"username": self.user, "password": self.password}, auth=False
            )["access_token"]
        return self._token

    def wait_for_dag(self, dag_id: str, timeout: float = 120) -> dict:
        """Wait until the DAG processor has parsed ``dag_id``; raise with its import errors if not."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                return self._request("GET", f"/api/v2/dags/{dag_id}")
            except RuntimeError as exc:
                if "HTTP 404" not in str(exc):
                    raise
            if time.monotonic() > deadline:
                errors = self._request("GET", "/api/v2/importErrors").get("import_errors", [])
                raise RuntimeError(f"DAG {dag_id} not found after {timeout:.0f}s; import errors: {errors}")
            time.sleep(2)

    def trigger(self, dag_id: str, conf: dict | None = None, logical_date: str | None = None) -> dict:
        self.wait_for_dag(dag_id)
        self._request("PATCH", f"/api/v2/dags/{dag_id}", {"is_paused": False})
        return self._request(
            "POST", f"/api/v2/dags/{dag_id}/dagRuns", {"conf": conf or {}, "logical_date": logical_date}
        )

    def run_state(self, dag_id: str, run_id: str) -> str:
        return self._request("GET", f"/api/v2/dags/{dag_id}/dagRuns/{urllib.parse.quote(run_id)}")["state"]

    def task_states(self, dag_id: str, run_id: str) -> dict[str, str]:
        tis = self._request("GET", f"/api/v2/dags/{dag_id}/dagRuns/{urllib.parse.quote(run_id)}/taskInstances")
        # a mapped task by its label (the table, from map_index_template), else by its index
        return {
            f"{t['task_id']}[{t.get('rendered_map_index') or t['map_index']}]"
            if t.get("map_index", -1) >= 0
            else t["task_id"]: t["state"]
            for t in tis["task_instances"]
        }

    def failures(self, dag_id: str, run_id: str) -> dict[str, str]:
        """Each failed task of a run (by its label) with the message of the exception that failed it."""
        run = f"/api/v2/dags/{dag_id}/dagRuns/{urllib.parse.quote(run_id)}"
        out = {}
        for t in self._request("GET", f"{run}/taskInstances")["task_instances"]:
            if t["state"] != "failed":
                continue
            mapped = t.get("map_index", -1) >= 0
            label = f"{t['task_id']}[{t.get('rendered_map_index') or t['map_index']}]" if mapped else t["task_id"]
            log = self._request(
                "GET",
                f"{run}/taskInstances/{t['task_id']}/logs/{t['try_number']}"
                + (f"?map_index={t['map_index']}" if mapped else ""),
            )
            events = [e for e in log.get("content", []) if isinstance(e, dict) and e.get("level") == "error"]
            # an exception's message, else the task's own error line (bad input ends a task without a traceback)
            errors = [d["exc_value"] for e in events for d in e.get("error_detail") or [] if d.get("exc_value")] or [
                e["event"] for e in events if e.get("event") and e["event"] != "Task exited"
            ]
            out[label] = errors[-1] if errors else "failed (see its log)"
        return out

    def wait(
        self,
        dag_id: str,
        run_id: str,
        timeout: float = 600,
        progress: Callable[[str], None] | None = None,
        tasks: bool = False,
    ) -> str:
        """Wait for the run's end; ``progress`` gets each new run state (and with ``tasks``, each task's
        new state as ``task: state``)."""
        deadline = time.monotonic() + timeout
        last: str | None = None
        seen: dict[str, str] = {}
        while time.monotonic() < deadline:
            state = self.run_state(dag_id, run_id)
            if progress and tasks:
                for task, task_state in self.task_states(dag_id, run_id).items():
                    if task_state and seen.get(task) != task_state:
                        progress(f"{task}: {task_state}")
                        seen[task] = task_state
            if progress and state != last:
                progress(state)
                last = state
            if state in TERMINAL:
                return state
            time.sleep(2)
        raise RuntimeError(f"DAG run {dag_id}/{run_id} still {last} after {timeout:.0f}s")
