"""The embedded stack's PostgreSQL data kept outside an unreachable state dir (``/var/tmp/seam-pg-*``) is
removed once the state dir that pointed to it is gone, never while it is in use."""

from __future__ import annotations

import os
from pathlib import Path

from seam_dev import stack


def _outside(base: Path, name: str, link: Path, pid: int | None = None) -> Path:
    data = base / f"seam-pg-{name}"
    data.mkdir()
    (data / "PG_VERSION").write_text("17\n")
    if pid is not None:
        (data / "postmaster.pid").write_text(f"{pid}\n{data}\n")
    data.with_suffix(".owner").write_text(str(link))
    return data


def test_data_whose_state_dir_is_gone_is_removed_data_in_use_is_kept(tmp_path, monkeypatch):
    outside = tmp_path / "var-tmp"
    outside.mkdir()
    monkeypatch.setattr(stack, "PG_OUTSIDE", outside)
    checkout = tmp_path / "checkout" / "postgres"
    checkout.mkdir(parents=True)
    kept = _outside(outside, "kept", checkout / "data")
    (checkout / "data").symlink_to(kept)
    orphan = _outside(outside, "orphan", tmp_path / "deleted-checkout" / "postgres" / "data")
    running = _outside(outside, "running", tmp_path / "gone" / "postgres" / "data", pid=os.getpid())
    stopped = _outside(outside, "stopped", tmp_path / "gone2" / "postgres" / "data", pid=2**22 + 7)
    stack._forget_orphaned_pg_data()
    assert kept.exists() and kept.with_suffix(".owner").exists()
    assert running.exists()  # a server still runs on it: its checkout may be gone, its server is not
    for gone in (orphan, stopped):
        assert not gone.exists() and not gone.with_suffix(".owner").exists()
