"""Notifiers for Seam's findings: a JSON webhook (``SeamWebhookNotifier``), and e-mail through an Airflow
SMTP connection (the SMTP provider's ``SmtpNotifier``). ``pipeline_notifiers`` builds the ones a pipeline
file asks for under ``notify:``; they fire once per failed validation, from the task itself."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from airflow.sdk import BaseNotifier


class SeamWebhookNotifier(BaseNotifier):
    """POST ``payload`` as JSON to ``url``; a non-2xx answer raises."""

    template_fields: Sequence[str] = ("url", "payload")

    def __init__(self, *, url: str, payload: Mapping[str, Any], timeout: float = 10) -> None:
        super().__init__()
        self.url, self.payload, self.timeout = url, dict(payload), timeout

    def notify(self, context) -> None:
        from seam.alerts import post_json

        post_json(self.url, self.payload, timeout=self.timeout)


def pipeline_notifiers(
    notify: Mapping[str, Any], *, subject: str, payload: Mapping[str, Any], html: str | None
) -> list[BaseNotifier]:
    """The notifiers configured in a pipeline's ``notify:`` section, loaded with one finding."""
    out: list[BaseNotifier] = []
    if notify.get("webhook"):
        out.append(SeamWebhookNotifier(url=notify["webhook"], payload=payload))
    email = notify.get("email")
    if email:
        from airflow.providers.smtp.notifications.smtp import SmtpNotifier

        out.append(
            SmtpNotifier(
                to=email["to"],
                smtp_conn_id=email.get("conn_id") or "smtp_default",
                from_email=email.get("from") or "seam@localhost",
                subject=email.get("subject") or subject,
                html_content=html,
            )
        )
    return out
