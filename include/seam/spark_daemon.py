"""Spark's Python worker daemon for Seam's jobs (``spark.python.daemon.module``).

Spark puts its own ``pyspark.zip`` first on the Python workers' path. Modules
imported from a zip are compiled from source in every worker process
(zipimport never caches bytecode): about a second of CPU per worker at the
start of every job, inside the batch's time. When that zip belongs to the very
pyspark installation on the path (local mode, or executors with Seam
installed), it is dropped so the installed, byte-compiled package is used;
anything else keeps Spark's path as it is.

Delivery guarantee: none (process start-up only).
"""

from __future__ import annotations

import importlib.util
import os
import sys


def prefer_installed_pyspark() -> bool:
    """Drop Spark's pyspark.zip from ``sys.path`` if the same pyspark is installed; True if dropped."""
    zips = [p for p in sys.path if os.path.basename(p) == "pyspark.zip"]
    if len(zips) != 1 or "pyspark" in sys.modules:
        return False
    zip_path = zips[0]
    owner = os.path.realpath(os.path.join(os.path.dirname(zip_path), "..", ".."))  # .../pyspark/python/lib
    sys.path.remove(zip_path)
    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None or os.path.realpath(os.path.dirname(spec.origin)) != owner:
        sys.path.insert(0, zip_path)  # another pyspark (or none): Spark's own copy it is
        return False
    return True


if __name__ == "__main__":
    prefer_installed_pyspark()
    from pyspark import daemon

    daemon.manager()
