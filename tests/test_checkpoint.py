"""The background WAL checkpointer (memory_core/db/checkpoint.py) on real SQLite files."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from memory_core.db.checkpoint import WalCheckpointer
from memory_core.db.sqlite import atomic
from memory_core.db.stores import Database, open_state
from memory_core.settings import Settings
from workers.context import WorkerContext


def _fill(db: Database, rows: int = 400) -> None:
    conn = db.conn
    with atomic(conn):
        conn.executemany("INSERT INTO blob (body) VALUES (?)", [(b"x" * 4000,)] * rows)


def _main_file_grows(path: Path, before: int, within_s: float) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if path.stat().st_size > before:
            return True
        time.sleep(0.02)
    return False


@pytest.mark.parametrize("watch", [True, False])
def test_watch_mode_checkpoints_writes_nobody_noted(tmp_path: Path, watch: bool) -> None:
    """A writer without autocheckpoint leaves its pages in the WAL; a watching checkpointer
    copies them into the main file without being told, a plain one waits for note_write."""
    db = Database(tmp_path / "x.db", "ops", autocheckpoint=False)
    db.conn.execute("CREATE TABLE blob (id INTEGER PRIMARY KEY, body BLOB)")
    db.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # the table is in the main file
    before = db.path.stat().st_size
    checkpointer = WalCheckpointer(db, interval_s=0.02, watch=watch)
    checkpointer.start()
    try:
        time.sleep(0.1)  # the first round has seen the file as it is
        _fill(db)
        assert _main_file_grows(db.path, before, 2.0) is watch
    finally:
        checkpointer.stop()
        db.close()


def test_the_worker_context_writes_without_checkpointing_in_the_commit(
        settings: Settings) -> None:
    ctx = WorkerContext.open(settings)
    try:
        conn = ctx.state.conn
        assert conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 0
        assert ctx.ops.conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 0
        assert all(c.is_alive() and c.watch for c in ctx.checkpointers)
    finally:
        ctx.close()
    assert not any(c.is_alive() for c in ctx.checkpointers)
    plain = open_state(settings)  # everyone else keeps SQLite's automatic checkpoint
    assert plain.conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 1000
    plain.close()
