"""SeamHook: the one place that turns Airflow connections into what Seam's jobs need.

Seam's pipeline files reference endpoints and secrets as ``${SEAM_...}``
variables; the hook fills them from the Airflow connections ``seam_mysql``,
``seam_kafka`` and ``seam_target`` so that credentials live in Airflow (or a
secrets backend), never in DAG code, task arguments or logs.
"""

from __future__ import annotations

import os

from airflow.sdk.bases.hook import BaseHook


class SeamHook(BaseHook):
    conn_name_attr = "mysql_conn_id"
    hook_name = "Seam"

    def __init__(
        self,
        *,
        mysql_conn_id: str = "seam_mysql",
        kafka_conn_id: str = "seam_kafka",
        target_conn_id: str = "seam_target",
        spark_conn_id: str = "seam_spark",
    ) -> None:
        super().__init__()
        self.mysql_conn_id = mysql_conn_id
        self.kafka_conn_id = kafka_conn_id
        self.target_conn_id = target_conn_id
        self.spark_conn_id = spark_conn_id

    def load_pipeline(self, path: str | None = None):
        """The pipeline file with its ``${SEAM_...}`` references filled from the connections."""
        from seam.config import load_pipeline

        return load_pipeline(path or None, env={**os.environ, **self.job_env()})

    def job_env(self) -> dict[str, str]:
        """Environment variables a Seam job reads its endpoints and credentials from, and the Spark master of
        the ``seam_spark`` connection for the jobs Seam starts itself (a ``stream.sink: spark`` sink): changing only that
        connection moves every Spark job (``seam.spark.spark_master``)."""
        env = job_env_from(
            self.get_connection(self.mysql_conn_id),
            self.get_connection(self.kafka_conn_id),
            self.get_connection(self.target_conn_id),
        )
        master = self.spark_master()
        return {**env, "SEAM_SPARK_MASTER_OVERRIDE": master} if master else env

    def spark_master(self) -> str | None:
        """The master of the Spark connection, as the apache-spark provider reads it (host, and port if any)."""
        from airflow.exceptions import AirflowNotFoundException

        try:
            conn = self.get_connection(self.spark_conn_id)
        except AirflowNotFoundException:
            return None
        return f"{conn.host}:{conn.port}" if conn.port else conn.host


def job_env_from(mysql, kafka, target) -> dict[str, str]:
    """Map three Airflow connections to the ``SEAM_*`` variables pipeline files use."""
    bootstrap = kafka.extra_dejson.get("bootstrap.servers") or f"{kafka.host}:{kafka.port}"
    return {
        "SEAM_MYSQL_HOST": mysql.host,
        "SEAM_MYSQL_PORT": str(mysql.port or 3306),
        "SEAM_MYSQL_USER": mysql.login,
        "SEAM_MYSQL_PASSWORD": mysql.password or "",
        "SEAM_KAFKA_BOOTSTRAP": bootstrap,
        "SEAM_TARGET_HOST": target.host,
        "SEAM_TARGET_PORT": str(target.port or 5432),
        "SEAM_TARGET_DB": target.schema,
        "SEAM_TARGET_USER": target.login,
        "SEAM_TARGET_PASSWORD": target.password or "",
    }
