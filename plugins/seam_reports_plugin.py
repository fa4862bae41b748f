"""Airflow plugin: Seam's validation reports in the API server, and the "Validation report" link on each
validate task that leads to them (``seam_airflow.reports``, ``seam_airflow.links``)."""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin

from seam_airflow.links import REPORTS_PREFIX, ValidationReportLink
from seam_airflow.reports import app


class SeamReportsPlugin(AirflowPlugin):
    name = "seam_reports"
    fastapi_apps = [{"app": app, "url_prefix": REPORTS_PREFIX, "name": "Seam validation reports"}]
    operator_extra_links = [ValidationReportLink()]
