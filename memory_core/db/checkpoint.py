"""A background WAL checkpointer for latency-critical writers.

A connection opened with ``autocheckpoint=False`` never pays for a checkpoint (which copies and
fsyncs pages: milliseconds) inside a write; this thread checkpoints for it instead.
"""

from __future__ import annotations

import threading

import structlog

from memory_core.db.sqlite import sqlite_module
from memory_core.db.stores import Database

log = structlog.get_logger(__name__)


class WalCheckpointer(threading.Thread):
    """Checkpoints the WAL of a database whose writer connections do not (PASSIVE: never
    blocks them), at most every ``interval_s`` and only after writes. Started on the first
    write; a failure is logged and retried on the next round."""

    def __init__(self, db: Database, interval_s: float = 0.5) -> None:
        super().__init__(name="mnemo-wal-checkpoint", daemon=True)
        self.db = db
        self.interval_s = interval_s
        self.dirty = threading.Event()
        self.stopped = threading.Event()
        self._start_lock = threading.Lock()

    def note_write(self) -> None:
        self.dirty.set()
        if self.ident is None:
            with self._start_lock:
                if self.ident is None and not self.stopped.is_set():
                    self.start()

    def run(self) -> None:
        conn = self.db.connect()  # its own connection, closed on exit
        try:
            while not self.stopped.wait(self.interval_s):
                if self.dirty.is_set():
                    self.dirty.clear()
                    try:
                        conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                    except sqlite_module().Error as e:
                        log.warning("wal_checkpoint_failed", error=type(e).__name__)
        finally:
            conn.close()

    def stop(self) -> None:
        self.stopped.set()
        if self.ident is not None:
            self.join(timeout=5)
