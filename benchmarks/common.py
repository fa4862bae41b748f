"""What the benchmarks share: the embedded stack up, and a pipeline file for their own tables."""

from __future__ import annotations

import sys
import tempfile
import threading
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "include"))

from seam.config import load_pipeline  # noqa: E402
from seam_dev.settings import use_stack_env  # noqa: E402
from seam_dev.stack import EmbeddedStack  # noqa: E402

# Each run's topics are new: the embedded broker keeps every message in memory, and some of its answers take
# time that grows with a topic's log (the end offset: 234 ms at 118 million messages, 9 ms at a thousand), so
# topics grown by earlier runs slowed later ones down
RUN = time.strftime("r%Y%m%dT%H%M%S")


def stack_up() -> None:
    """MariaDB, the broker and PostgreSQL started, and their endpoints in this process's environment."""
    stack = EmbeddedStack()
    stack.up(("mysql", "kafka", "postgres"))
    use_stack_env(stack.state)


def bench_pipeline(
    tables: list[dict], topic_prefix: str | None = None, snapshot: str | None = None, stream: dict | None = None
) -> str:
    """Start MariaDB, the broker and PostgreSQL; return a temporary copy of the demo pipeline with ``tables``
    (and ``source.snapshot`` and the ``stream`` section when given)."""
    stack_up()
    doc = yaml.safe_load(open(load_pipeline().path))
    doc["tables"] = tables
    if snapshot:
        doc["source"]["snapshot"] = snapshot
    if stream:
        doc["stream"] = {**(doc.get("stream") or {}), **stream}
    if topic_prefix:
        doc["kafka"]["topic_prefix"] = f"{topic_prefix}.{RUN}"
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        yaml.safe_dump(doc, f)
    return f.name


def side_by_side(*work, timeout: float | None = None) -> None:
    """Run each of ``work`` in a thread of its own (a writer and the poll that times it) until all return."""
    threads = [threading.Thread(target=w) for w in work]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout)
