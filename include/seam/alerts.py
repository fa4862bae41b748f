"""Alerts from Seam's own processes (the stream stopping a table, for one): a
JSON POST to the pipeline's ``notify.webhook`` and an ERROR log line. Alerts
from Airflow tasks go through Airflow's notifiers instead.

Delivery guarantee: best effort, at least once per event seen (a restarted
reader that meets the same DDL alerts again); a failed POST is logged, never
raised: an unreachable receiver must not stop the stream.
"""

from __future__ import annotations

import json
import logging
import urllib.request

from seam.core.pipeline import Pipeline

log = logging.getLogger("seam.alerts")


def alert(pipeline: Pipeline, table: str, problem: str, detail: str) -> None:
    """Report ``problem`` on ``table``; ``detail`` says what happened and what to do."""
    log.error("ALERT %s: %s: %s", table, problem, detail)
    url = (pipeline.notify or {}).get("webhook")
    if not url:
        return
    try:
        post_json(url, {"pipeline": pipeline.name, "table": table, "problem": problem, "detail": detail}, timeout=5)
    except OSError as exc:
        log.warning("alert webhook %s failed: %s", url.split("?")[0], exc)


def post_json(url: str, payload: dict, timeout: float) -> None:
    """POST ``payload`` as JSON; a non-2xx answer or an unreachable receiver raises (OSError)."""
    request = urllib.request.Request(
        url, data=json.dumps(payload, default=str).encode(), headers={"Content-Type": "application/json"}, method="POST"
    )
    with urllib.request.urlopen(request, timeout=timeout) as response:
        response.read()
