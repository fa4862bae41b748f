"""Validation reports served by Airflow's API server at ``/seam-reports/<dag_id>/<report>`` (the plugin in
``plugins/seam_reports_plugin.py`` mounts it), to whoever may read that DAG's task instances under
Airflow's own auth: the UI's session cookie, or a bearer token. Reports hold rows that differ, so there is
no other way in. A report is read from the folder the worker wrote it to (``SEAM_REPORT_DIR``, else
``.seam/reports``): with workers on other machines, that folder is a shared volume."""

from __future__ import annotations

import re

from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity
from airflow.api_fastapi.core_api.security import requires_access_dag
from fastapi import Depends, FastAPI, HTTPException
from fastapi.responses import HTMLResponse

from seam.validate.report import report_folder

_REPORT = re.compile(r"validate-[^/\\\x00]{1,400}\.html")  # the names seam.validate.validation gives them

app = FastAPI(title="Seam validation reports")


@app.get(
    "/{dag_id}/{name}",
    response_class=HTMLResponse,
    dependencies=[Depends(requires_access_dag("GET", DagAccessEntity.TASK_INSTANCE))],
)
def validation_report(dag_id: str, name: str) -> HTMLResponse:
    folder = report_folder().resolve()
    path = (folder / name).resolve()
    if not _REPORT.fullmatch(name) or path.parent != folder or not path.is_file():
        raise HTTPException(status_code=404, detail=f"no validation report {name!r} in {folder}")
    return HTMLResponse(path.read_text(encoding="utf-8"))
