"""The link from a validate task in Airflow's UI to its HTML report ("Validation report"), served by
``seam_airflow.reports`` in the API server. Light on purpose: operators import it at DAG parse time."""

from __future__ import annotations

from urllib.parse import quote

from airflow.configuration import conf
from airflow.sdk import BaseOperatorLink

REPORTS_PREFIX = "/seam-reports"


class ValidationReportLink(BaseOperatorLink):
    """Set on the worker when the task ends (Airflow stores it for the UI): the report the task wrote."""

    name = "Validation report"

    def get_link(self, operator, *, ti_key) -> str:
        report = getattr(operator, "report_name", None)
        if not report:
            return ""
        base = (conf.get("api", "base_url", fallback="") or "").rstrip("/")
        return f"{base}{REPORTS_PREFIX}/{quote(ti_key.dag_id, safe='')}/{quote(report, safe='')}"
